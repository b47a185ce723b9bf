# Fast ingest (MEMOPTIMIZE_WRITE): robustness against hostile or unusual databases.
# Each part guards a fix; it fails if the fix regresses.
#   1. A database without the extension, where an ordinary role made its own
#      aq.fast_ingest_tables (relid text, index fast_ingest_tables_pkey): plain INSERTs
#      (aq.memoptimize_write off and on) must not read it as aq's registry (the backend
#      crashed reading a text index with an oid comparison); a hinted one fails cleanly.
#   2. search_path hijack: a non-superuser database owner sets its database's search_path
#      to a schema with its own + (bigint, bigint) and = (oid, oid) operators whose
#      functions log current_user and try ALTER ROLE ... SUPERUSER.  aq's own statements
#      (the drain's progress upsert, the registry change of enable/disable) run as a
#      superuser and must not use them: the log stays empty, the role stays ordinary.
#   3. ALLOW_CONNECTIONS false with rows pending: the database's drain worker exits
#      without draining (pg_cancel_backend of the idle worker: the error ends it, via the
#      background worker's own error handler; pg_terminate_backend would make it drain
#      everything first, as at shutdown)
#      and has to start again in a database that takes no connections: the rows must be
#      applied, not discarded.
#   4. ALTER DATABASE ... SET aq.commit_wait = nowait must not make the drain's batch
#      commits asynchronous (aq.commit_stats(true): not_waited does not move, waited grows
#      by at least the batches), with wal_writer_delay = 10s so that the WAL writer does
#      not flush for an asynchronous commit.
#   5. DROP DATABASE ... WITH (FORCE) with rows pending and no drain worker connected to
#      it (a second server whose only free worker slot is taken by another database's
#      drain): once a slot is free the launcher's starts fail, it finds the database gone
#      and logs the rows as discarded; the ring is released; fast ingest elsewhere works.
#   6. A transient error (57014: the drain worker cancelled while it waits for a lock)
#      retries the batch: all rows applied, none rejected.  6a: the wait for the table
#      lock (ACCESS EXCLUSIVE held by another session); 6b: the wait, in the row-by-row
#      retry after a batch failed on a bad row, for another session's uncommitted key.
use strict;
use warnings;

use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use AqIngest qw(wait_for);

my $t_start = time;
my $node = PostgreSQL::Test::Cluster->new('ingest_robustness');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
autovacuum = off
wal_writer_delay = '10s'
));
$node->start;
my $log_start = -s $node->logfile;

$node->safe_psql('postgres', 'CREATE EXTENSION aq');

sub set_delay { AqIngest::set_drain_delay($node, $_[0]); }

sub psql_as
{
	my ($db, $user, $sql) = @_;
	return $node->psql($db, $sql, connstr => $node->connstr($db) . " user=$user", on_error_stop => 1);
}

sub area
{
	my ($cols) = @_;
	return split /\|/, $node->safe_psql('postgres', "SELECT $cols FROM aq.memoptimize_write_area");
}

sub drain_pid
{
	my ($db, $extra) = @_;
	$extra //= '';
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(pid::text, ','), '') FROM pg_stat_activity"
		  . " WHERE backend_type = 'aq fast ingest drain' AND datname = '$db' $extra");
}


my ($rc, $out, $err);

# ------------------------------------------------------------------ 1. fake registry
{
	my $mark = -s $node->logfile;
	$node->safe_psql('postgres', 'CREATE ROLE fake_owner LOGIN; CREATE DATABASE fake_db OWNER fake_owner');
	($rc, $out, $err) = psql_as('fake_db', 'fake_owner', q{
CREATE TABLE t (id int);
CREATE SCHEMA aq;
CREATE TABLE aq.fast_ingest_tables (relid text CONSTRAINT fast_ingest_tables_pkey PRIMARY KEY);
INSERT INTO aq.fast_ingest_tables
SELECT 't'::regclass::oid::text UNION ALL SELECT 'public.t' UNION ALL SELECT repeat('x', 500)
UNION ALL SELECT g::text || '-fake' FROM generate_series(1, 200) g;
});
	is($rc . $err, '0', '1: an ordinary role made its own aq.fast_ingest_tables (relid text) in a database without aq')
	  or diag($err);
	is($node->safe_psql('fake_db', "SELECT count(*) FROM pg_extension WHERE extname = 'aq'"), '0',
		'1: the extension is not installed in fake_db');

	($rc, $out, $err) = psql_as('fake_db', 'fake_owner', q{
INSERT INTO t VALUES (1);
SELECT count(*) FROM t;
});
	is($rc . $err, '0', '1: a plain INSERT into the role\'s table succeeds') or diag($err);
	is($out, '1', '1: the row is visible immediately (an ordinary insert)');

	($rc, $out, $err) = psql_as('fake_db', 'fake_owner', q{
SET aq.memoptimize_write = on;
INSERT INTO t VALUES (2);
SELECT count(*) FROM t;
});
	is($rc . $err, '0', '1: with aq.memoptimize_write = on a plain INSERT succeeds too') or diag($err);
	is($out, '2', '1: ... and its row is visible immediately');

	($rc, $out, $err) = psql_as('fake_db', 'fake_owner', 'INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t VALUES (3)');
	note "1: hinted insert in fake_db: rc $rc, $err";
	my $n = $node->safe_psql('fake_db', 'SELECT count(*) FROM t');
	ok(($rc != 0 && $n eq '2') || ($rc == 0 && $n eq '3'),
		"1: a hinted INSERT either fails or is an ordinary insert (rc $rc, rows $n), never buffered for a fake registry");
	my $log = slurp_file($node->logfile, $mark);
	unlike($log, qr/terminated by signal|PANIC|TRAP:|server process .* was terminated/,
		'1: no backend crashed') or diag($log);
}

# ------------------------------------------------------------------ 2. search_path hijack
{
	$node->safe_psql('postgres', 'CREATE ROLE sp_owner LOGIN CREATEDB');
	($rc, $out, $err) = psql_as('postgres', 'sp_owner', 'CREATE DATABASE db2');
	is($rc . $err, '0', '2: sp_owner (CREATEDB, not superuser) created db2') or diag($err);
	$node->safe_psql('db2', 'CREATE EXTENSION aq; GRANT USAGE ON SCHEMA aq TO sp_owner');
	($rc, $out, $err) = psql_as('db2', 'sp_owner', q{
CREATE TABLE public.t2 (id int PRIMARY KEY, v text);
SELECT aq.enable_fast_ingest('public.t2');
CREATE TABLE public.hijack_log (who text, op text, at timestamptz DEFAULT clock_timestamp());
GRANT INSERT ON public.hijack_log TO PUBLIC;
CREATE SCHEMA evil;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
CREATE FUNCTION evil.plus(bigint, bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.hijack_log (who, op) VALUES (current_user, '+');
  BEGIN
    EXECUTE 'ALTER ROLE sp_owner SUPERUSER';
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  RETURN $1 OPERATOR(pg_catalog.+) $2;
END $$;
CREATE OPERATOR evil.+ (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.plus);
CREATE FUNCTION evil.oideq(oid, oid) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.hijack_log (who, op) VALUES (current_user, '=');
  BEGIN
    EXECUTE 'ALTER ROLE sp_owner SUPERUSER';
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  RETURN $1 OPERATOR(pg_catalog.=) $2;
END $$;
CREATE OPERATOR evil.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = evil.oideq);
ALTER DATABASE db2 SET search_path = evil, pg_catalog, public;
});
	is($rc . $err, '0', '2: sp_owner set up its table, schema evil with + (bigint, bigint) and = (oid, oid), and the database search_path')
	  or diag($err);

	# The trap works: in a new session the owner's own expressions pick evil's operators.
	($rc, $out, $err) = psql_as('db2', 'sp_owner', q{
SELECT 1::bigint + 2::bigint, 7::oid = 7::oid;
SELECT string_agg(who || op, ',' ORDER BY op) FROM public.hijack_log;
TRUNCATE public.hijack_log;
});
	is($rc . $err, '0', '2: probe of the hijacked search_path') or diag($err);
	is($out, "3|t\nsp_owner+,sp_owner=", '2: with the database search_path, + and = on those types are evil\'s (probe)');

	# Registry changes under the hijacked search_path, then hinted inserts from new sessions.
	($rc, $out, $err) = psql_as('db2', 'sp_owner', q{
SELECT aq.disable_fast_ingest('public.t2');
SELECT aq.enable_fast_ingest('public.t2');
});
	is($rc . $err, '0', '2: disable/enable_fast_ingest under the hijacked search_path') or diag($err);
	for my $part (0, 1)
	{
		my $lo = $part * 25 + 1;
		my $hi = $lo + 24;
		($rc, $out, $err) = psql_as('db2', 'sp_owner', qq{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO public.t2 SELECT g, 'v' || g FROM generate_series($lo, $hi) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO public.t2 VALUES (1000 - $part, 'x');
SELECT aq.write_end('30 s');
});
		is($rc . $err, '0', "2: hinted inserts and write_end by sp_owner (session $part)") or diag($err);
	}
	is($node->safe_psql('db2', 'SELECT count(*) FROM public.t2'), '52', '2: all 52 rows were applied');
	is($node->safe_psql('db2', 'SELECT sum(applied_rows) FROM aq.fast_ingest_progress'), '52',
		'2: the drain recorded its progress in db2');
	is($node->safe_psql('db2', q{SELECT coalesce(string_agg(who || op, ','), '') FROM public.hijack_log}), '',
		'2: none of aq\'s statements (drain progress upsert, registry change) used evil\'s operators');
	is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'sp_owner'}), 'f',
		'2: sp_owner is still not a superuser');
}

# ------------------------------------------------------------------ 3. ALLOW_CONNECTIONS false
{
	$node->safe_psql('postgres', 'CREATE DATABASE db3');
	$node->safe_psql('db3', q{
CREATE EXTENSION aq;
CREATE TABLE t3 (id int PRIMARY KEY, v text);
SELECT aq.enable_fast_ingest('t3');
});
	my $s3 = $node->background_psql('db3');
	set_delay(3600000);
	$s3->query_safe(q{INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t3 SELECT g, 'a' || g FROM generate_series(1, 50) g});
	$s3->query_safe(q{INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t3 SELECT g, 'b' || g FROM generate_series(51, 100) g});
	is($s3->query_safe('SELECT count(*) FROM t3'), '0', '3: 100 rows committed in db3, none applied (drain delay)');
	my $w1 = '';
	wait_for('the db3 drain worker', 15, sub { $w1 = drain_pid('db3'); $w1 ne '' });
	isnt($w1, '', "3: a drain worker waits in db3 ($w1)");

	my $mark = -s $node->logfile;
	my ($rejected0) = area('rejected_rows');
	$node->safe_psql('postgres', 'ALTER DATABASE db3 ALLOW_CONNECTIONS false');
	# (connect_fails gives psql no input: a psql refused at once cannot break the pipe of its stdin.)
	$node->connect_fails($node->connstr('db3'), '3: db3 now refuses connections',
		expected_stderr => qr/not currently accepting connections/);

	# The worker leaves without draining; a new one has to connect to db3.
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($w1)");
	my $w2 = '';
	wait_for('a new db3 drain worker', 20, sub { $w2 = drain_pid('db3', "AND pid <> $w1"); $w2 ne '' });
	isnt($w2, '', "3: a new drain worker ($w2) connected to db3 although it takes no connections");
	is($s3->query_safe('SELECT count(*) FROM t3'), '0', '3: the cancelled worker had not applied the rows (still held)');

	set_delay(0);
	my ($buffered, $rejected);
	wait_for('db3 rows drained', 30, sub {
		($buffered, $rejected) = area('rows_buffered, rejected_rows');
		$buffered eq '0';
	});
	is($buffered, '0', '3: rows_buffered returned to 0');
	is($rejected, $rejected0, '3: rejected_rows unchanged (nothing discarded)');
	is($s3->query_safe('SELECT count(*) FROM t3'), '100', '3: all 100 rows are in t3 (seen by the session still in db3)');
	$s3->quit;
	my $log = slurp_file($node->logfile, $mark);
	unlike($log, qr/discarded/, '3: the server log does not mention discarded rows') or diag($log);
	$node->safe_psql('postgres', 'ALTER DATABASE db3 ALLOW_CONNECTIONS true');
	is($node->safe_psql('db3', q{SELECT count(*), count(*) FILTER (WHERE v = CASE WHEN id <= 50 THEN 'a' ELSE 'b' END || id) FROM t3}),
		'100|100', '3: after ALLOW_CONNECTIONS true a new session sees all 100 rows, intact');
}

# ------------------------------------------------------------------ 4. commit_wait = nowait
{
	$node->safe_psql('postgres', 'CREATE DATABASE db4');
	$node->safe_psql('db4', q{
CREATE EXTENSION aq;
CREATE TABLE t4 (id int PRIMARY KEY, v text);
SELECT aq.enable_fast_ingest('t4');
ALTER DATABASE db4 SET aq.commit_wait = 'nowait';
});
	is($node->safe_psql('db4', 'SHOW aq.commit_wait'), 'nowait', '4: db4 sessions get aq.commit_wait = nowait');
	set_delay(3600000);
	($rc, $out, $err) = $node->psql('db4', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t4 SELECT g, 'v' || g FROM generate_series(1, 40) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t4 SELECT g, 'v' || g FROM generate_series(41, 80) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t4 SELECT g, 'v' || g FROM generate_series(81, 120) g;
}, on_error_stop => 1);
	is($rc . $err, '0', '4: 120 rows committed into db4') or diag($err);
	is($node->safe_psql('db4', 'SELECT count(*) FROM t4'), '0', '4: none applied yet');
	my $w = '';
	wait_for('the db4 drain worker', 15, sub { $w = drain_pid('db4'); $w ne '' });
	isnt($w, '', "4: the db4 drain worker ($w) is connected (with the database's settings)");

	my ($waited0, $not_waited0) = split /\|/, $node->safe_psql('postgres', 'SELECT waited, not_waited FROM aq.commit_stats(true)');
	my ($batches0) = area('batches');
	set_delay(0);
	$node->safe_psql('postgres', "SELECT aq.writes_flush('30 s')");
	my ($waited1, $not_waited1) = split /\|/, $node->safe_psql('postgres', 'SELECT waited, not_waited FROM aq.commit_stats(true)');
	my ($batches1) = area('batches');
	my $batches = $batches1 - $batches0;
	note "4: drain batches $batches, commits waited +" . ($waited1 - $waited0) . ', not waited +' . ($not_waited1 - $not_waited0);
	is($node->safe_psql('db4', 'SELECT count(*) FROM t4'), '120', '4: the 120 rows were applied');
	ok($batches >= 1, "4: the drain ran $batches batch(es)");
	is($not_waited1 - $not_waited0, 0, '4: no drain commit was acknowledged before its WAL was flushed (commit_stats.not_waited)');
	cmp_ok($waited1 - $waited0, '>=', $batches, '4: every drain batch commit waited for its flush (commit_stats.waited)');

	($rc, $out, $err) = $node->psql('db4', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t4 SELECT g, 'v' || g FROM generate_series(121, 130) g;
SELECT aq.write_end('30 s');
SELECT count(*) FROM t4;
}, on_error_stop => 1);
	is($rc . $err, '0', '4: hinted insert and write_end from a new db4 session') or diag($err);
	is((split /\n/, $out)[-1], '130', '4: its rows are applied when write_end returns');
}

# ------------------------------------------------------------------ 5. DROP DATABASE with rows pending
# A second server with a single free background-worker slot (max_worker_processes = 5:
# the launcher, aq's log writer, aq's settler launcher and the logical replication launcher
# are static), so that
# rows can be pending in db5 with no drain worker connected to it: the slot is taken by the
# worker of another database whose rows the drain delay holds.  (A worker connected to db5
# would be terminated by DROP ... WITH (FORCE), and on SIGTERM it drains everything before
# it leaves: the rows would be applied, not discarded.)
{
	my $n2 = PostgreSQL::Test::Cluster->new('ingest_robustness_drop');
	$n2->init;
	$n2->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
autovacuum = off
max_worker_processes = 5
max_parallel_workers_per_gather = 0
));
	$n2->start;
	my $n2_log_start = -s $n2->logfile;
	my $set_delay2 = sub {
		my ($ms) = @_;
		$n2->safe_psql('postgres', "ALTER SYSTEM SET aq.fast_ingest_drain_delay = $ms; SELECT pg_reload_conf();");
		$n2->poll_query_until('postgres',
			"SELECT setting = '$ms' FROM pg_settings WHERE name = 'aq.fast_ingest_drain_delay'")
		  or die "the drain delay $ms did not take effect";
		usleep(500_000);
	};
	my $area2 = sub { split /\|/, $n2->safe_psql('postgres', "SELECT $_[0] FROM aq.memoptimize_write_area") };
	$n2->safe_psql('postgres', 'CREATE EXTENSION aq; CREATE DATABASE hold; CREATE DATABASE db5;');
	for my $db ('hold', 'db5')
	{
		$n2->safe_psql($db, q{
CREATE EXTENSION aq;
CREATE TABLE t (id int PRIMARY KEY);
SELECT aq.enable_fast_ingest('t');
});
	}
	my $oid5 = $n2->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'db5'");
	$set_delay2->(3600000);
	$n2->safe_psql('hold', q{INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t SELECT generate_series(1, 10)});
	my $hold_pid = '';
	wait_for('the drain worker of hold', 15, sub {
		$hold_pid = $n2->safe_psql('postgres', q{SELECT coalesce(string_agg(pid::text, ','), '') FROM pg_stat_activity
		  WHERE backend_type = 'aq fast ingest drain' AND datname = 'hold'});
		$hold_pid ne '';
	});
	isnt($hold_pid, '', "5: the drain worker of database hold ($hold_pid) takes the only free worker slot");

	my $mark = -s $n2->logfile;
	($rc, $out, $err) = $n2->psql('db5', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t SELECT generate_series(1, 20);
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t SELECT generate_series(21, 30);
}, on_error_stop => 1);
	is($rc . $err, '0', '5: 30 rows committed into db5') or diag($err);
	my $log = '';
	ok(wait_for('a failed start for db5', 15, sub {
		$log = slurp_file($n2->logfile, $mark);
		$log =~ /could not start a fast-ingest drain worker for database $oid5/;
	}), '5: no drain worker can start for db5 (no free worker slot)') or diag($log);
	is($n2->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE datname = 'db5'}), '0',
		'5: nothing is connected to db5');
	my ($buffered0, $rejected0) = $area2->('rows_buffered, rejected_rows');
	is($buffered0, '40', '5: 40 rows buffered (30 of db5, 10 of hold)');

	my $t0 = time;
	($rc, $out, $err) = $n2->psql('postgres', "SET statement_timeout = '20s'; DROP DATABASE db5 WITH (FORCE)");
	is($rc . $err, '0', sprintf('5: DROP DATABASE db5 WITH (FORCE) with rows pending (%.1f s)', time - $t0)) or diag($err);
	$t0 = time;
	$set_delay2->(0);
	wait_for('"discarded" in the log', 60, sub {
		$log = slurp_file($n2->logfile, $mark);
		$log =~ /fast-ingest rows of database $oid5 discarded/;
	});
	like($log, qr/aq: 30 fast-ingest rows of database $oid5 discarded: the database was dropped/,
		sprintf('5: the launcher logged the 30 rows of the dropped database as discarded (%.1f s after the delay was lowered)',
			time - $t0)) or diag($log);
	my ($buffered, $rejected);
	wait_for('ring released', 10, sub {
		($buffered, $rejected) = $area2->('rows_buffered, rejected_rows');
		$buffered eq '0';
	});
	is($buffered, '0', '5: rows_buffered returned to 0');
	is($rejected - $rejected0, 30, '5: the 30 discarded rows count as rejected');
	is($n2->safe_psql('hold', 'SELECT count(*) FROM t'), '10', '5: the rows held in database hold were applied');

	($rc, $out, $err) = $n2->psql('hold', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t SELECT generate_series(11, 20);
SELECT aq.write_end('30 s');
SELECT count(*) FROM t;
}, on_error_stop => 1);
	is($rc . $err, '0', '5: fast ingest into another database afterwards') or diag($err);
	is((split /\n/, $out)[-1], '20', '5: ... applied');
	$n2->stop;
	unlike(slurp_file($n2->logfile, $n2_log_start), qr/PANIC|TRAP:|terminated by signal/,
		'5: node 2: no PANIC, TRAP or process terminated by a signal');
}

# ------------------------------------------------------------------ 6a. transient error: table lock
{
	$node->safe_psql('postgres', q{
CREATE TABLE t6 (id int PRIMARY KEY, v text);
SELECT aq.enable_fast_ingest('t6');
});
	my $relid6 = $node->safe_psql('postgres', "SELECT 't6'::regclass::oid");
	set_delay(3600000);
	($rc, $out, $err) = $node->psql('postgres', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t6 SELECT g, 'v' || g FROM generate_series(1, 20) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t6 SELECT g, 'v' || g FROM generate_series(21, 40) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t6 SELECT g, 'v' || g FROM generate_series(41, 60) g;
}, on_error_stop => 1);
	is($rc . $err, '0', '6a: 60 rows committed into t6') or diag($err);
	is($node->safe_psql('postgres', 'SELECT count(*) FROM t6'), '0', '6a: none applied yet');
	my ($rejected0) = area('rejected_rows');

	my $locker = $node->background_psql('postgres');
	$locker->query_safe('BEGIN; LOCK TABLE t6 IN ACCESS EXCLUSIVE MODE;');
	my $mark = -s $node->logfile;
	set_delay(0);
	my $w = '';
	wait_for('the drain waiting for the lock', 15, sub { $w = drain_pid('postgres', "AND wait_event_type = 'Lock'"); $w ne '' });
	isnt($w, '', "6a: the drain worker ($w) waits for the lock on t6");
	usleep(1_000_000);
	is($node->safe_psql('postgres', "SELECT pg_cancel_backend($w)"), 't', '6a: the waiting drain worker is cancelled once');
	my $again = '';
	wait_for('the drain waiting again', 15, sub { $again = drain_pid('postgres', "AND wait_event_type = 'Lock'"); $again ne '' });
	isnt($again, '', "6a: the drain retried the batch and waits for the lock again ($again)");
	is($again, $w, '6a: the same worker retried it (the cancel ended neither the worker nor its rows)');
	$locker->query_safe('ROLLBACK');
	$locker->quit;

	($rc, $out, $err) = $node->psql('postgres', "SELECT aq.writes_flush('30 s')");
	is($rc . $err, '0', '6a: writes_flush returns') or diag($err);
	is($node->safe_psql('postgres', q{SELECT count(*), count(*) FILTER (WHERE v = 'v' || id) FROM t6}), '60|60',
		'6a: all 60 rows applied');
	is($node->safe_psql('postgres', "SELECT count(*) FROM aq.fast_ingest_rejects WHERE relid = $relid6"), '0',
		'6a: no reject for t6 (57014 is transient)');
	my ($rejected1) = area('rejected_rows');
	is($rejected1, $rejected0, '6a: rejected_rows unchanged');
	my $log = slurp_file($node->logfile, $mark);
	like($log, qr/canceling statement due to user request/, '6a: the log shows the drain\'s cancelled lock wait');
}

# 6b. The same cancel while the drain, already retrying row by row (the batch failed on a
# genuinely bad row: a duplicate of a committed key), waits inside a row's insert for an
# uncommitted conflicting key of another session.  (The table lock of 6a is taken outside
# the rows' subtransactions, where an error always failed the whole batch.)  The cancelled
# row must not be rejected with 57014: the batch is retried, the row applied once the
# other session rolls back; only the duplicate is rejected (23505).  A trigger makes the
# drain insert row by row in order (the duplicate comes first, so the batch fails on it
# before it reaches the conflicting key).
{
	$node->safe_psql('postgres', q{
CREATE TABLE t6b (id int PRIMARY KEY, v text);
CREATE FUNCTION t6b_keep() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER t6b_keep BEFORE INSERT ON t6b FOR EACH ROW EXECUTE FUNCTION t6b_keep();
INSERT INTO t6b VALUES (1000, 'committed');
SELECT aq.enable_fast_ingest('t6b');
});
	my $relid = $node->safe_psql('postgres', "SELECT 't6b'::regclass::oid");
	set_delay(3600000);
	($rc, $out, $err) = $node->psql('postgres', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t6b VALUES (1000, 'dup');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t6b SELECT g, 'v' || g FROM generate_series(1, 20) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t6b SELECT g, 'v' || g FROM generate_series(21, 40) g;
}, on_error_stop => 1);
	is($rc . $err, '0', '6b: 41 rows committed into t6b (one a duplicate of a committed key)') or diag($err);
	my ($rejected0) = area('rejected_rows');
	my $other = $node->background_psql('postgres');
	$other->query_safe(q{BEGIN; INSERT INTO t6b VALUES (5, 'uncommitted');});
	my $mark = -s $node->logfile;
	set_delay(0);
	my $w = '';
	wait_for('the drain waiting for the uncommitted key', 15,
		sub { $w = drain_pid('postgres', "AND wait_event_type = 'Lock' AND wait_event = 'transactionid'"); $w ne '' });
	isnt($w, '', "6b: the drain worker ($w) waits for the other session's uncommitted key 5");
	usleep(500_000);
	is($node->safe_psql('postgres', "SELECT pg_cancel_backend($w)"), 't', '6b: the waiting drain worker is cancelled once');
	my $again = '';
	wait_for('the drain waiting again', 15,
		sub { $again = drain_pid('postgres', "AND wait_event_type = 'Lock' AND wait_event = 'transactionid'"); $again ne '' });
	isnt($again, '', "6b: the drain retried and waits for key 5 again ($again)");
	$other->query_safe('ROLLBACK');
	$other->quit;
	($rc, $out, $err) = $node->psql('postgres', "SELECT aq.writes_flush('30 s')");
	is($rc . $err, '0', '6b: writes_flush returns') or diag($err);
	is($node->safe_psql('postgres', q{SELECT count(*), count(*) FILTER (WHERE v = 'v' || id) FROM t6b WHERE id <= 40}), '40|40',
		'6b: all 40 good rows applied, key 5 among them');
	is($node->safe_psql('postgres', "SELECT string_agg(sqlstate || ' ' || row_text, '; ') FROM aq.fast_ingest_rejects WHERE relid = $relid"),
		'23505 (1000,dup)', '6b: the only reject is the duplicate (23505), not the cancelled row (57014)');
	my ($rejected1) = area('rejected_rows');
	is($rejected1 - $rejected0, 1, '6b: rejected_rows grew by 1');
	like(slurp_file($node->logfile, $mark), qr/canceling statement due to user request/,
		'6b: the log shows the drain\'s cancelled wait');
}

$node->stop;
my $log = slurp_file($node->logfile, $log_start);
unlike($log, qr/PANIC|TRAP:|terminated by signal/, 'the server log shows no PANIC, TRAP or process terminated by a signal');
note sprintf('total %.1f s', time - $t_start);
done_testing();
