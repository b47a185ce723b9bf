# Fast ingest: SIGTERM ends a drain that sits in a table owner's slow trigger.
# Guards the fix of: "the fast-ingest drain inside a slow user trigger kept retrying with
# budgets up to 320 s, ignored pg_terminate_backend, and DROP DATABASE ... WITH (FORCE) failed
# with 55006 meanwhile".
#   1. pg_terminate_backend: a non-superuser's fast-ingest table in `ing` has a BEFORE INSERT
#      trigger that waits for an advisory lock the test holds.  100 hinted rows are committed
#      (acknowledged: in the ring); once the drain waits for the lock in the trigger it is
#      terminated: it is gone within the drain's ten-second stop window (not a 5..320 s run
#      budget), and its log lines show it stopped in that run.  The lock released, a new drain
#      (started by the launcher) applies every row once: ids 1..100, the trigger passed once
#      per row as the owner, nothing rejected, the apply watermark reaches the writer's.
#   2. DROP DATABASE ... WITH (FORCE) while the drain of `gone` waits in such a trigger
#      succeeds (not 55006): 2a. the lock's holder is a session of `gone` (FORCE ends it too);
#      2b. the trigger is slow by itself (nothing FORCE ends releases it).  The databases are
#      gone, their rows are released from the ring, and fast ingest in `ing` still works.
#   3. The server log: no PANIC, no assertion failure, no process ended by a signal, no XX000.
#
# No fixed sleeps in the test: poll_query_until and aq.write_end(); timings are printed.  Two
# are asserted, each with a wide margin: the terminated drain is gone within 20 s (its stop
# window is 10 s; a run after a deferral may take 10 .. 320 s), and its run ended less than
# 5 s (the first run budget) after the rows' commit.
use strict;
use warnings;

use FindBin;
use IPC::Run;
use Time::HiRes qw(time);
use Time::Local qw(timegm);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib $FindBin::Bin;
use AqSession qw(query finish);

my $t_start = time;
my $node    = PostgreSQL::Test::Cluster->new('ingest_terminate');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
autovacuum = off
));
$node->start;

# ---------------------------------------------------------------- an interactive session
# AqSession.pm: a psql process fed one statement at a time (query() returns its output and errors).
sub session { AqSession::session($node, @_) }

sub ms { sprintf('%.0f ms', 1000 * $_[0]) }

sub psql_as
{
	my ($db, $user, $sql) = @_;
	return $node->psql($db, $sql, connstr => $node->connstr($db) . " user=$user", on_error_stop => 1);
}

# ---------------------------------------------------------------- setup
# A database with aq, owned objects of the non-superuser ing_owner: table t (fast ingest on),
# t_passes (one row per committed pass of the trigger) and t's BEFORE INSERT trigger $body.
$node->safe_psql('postgres', q{
CREATE ROLE ing_owner LOGIN;
CREATE TABLE terminated (pid integer);
});

sub make_database
{
	my ($db, $body) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, q{
CREATE EXTENSION aq;
GRANT USAGE ON SCHEMA aq TO ing_owner;
GRANT CREATE ON SCHEMA public TO ing_owner;
});
	my ($rc, $out, $err) = psql_as($db, 'ing_owner', qq{
CREATE TABLE public.t (id bigint PRIMARY KEY, note text);
CREATE TABLE public.t_passes (id bigint, who name);
CREATE FUNCTION public.t_slow() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
  $body
  INSERT INTO public.t_passes VALUES (NEW.id, current_user);
  RETURN NEW;
END \$\$;
CREATE TRIGGER t_slow BEFORE INSERT ON public.t FOR EACH ROW EXECUTE FUNCTION public.t_slow();
SELECT aq.enable_fast_ingest('public.t');
});
	is($rc . $err, '0', "setup: ing_owner (not a superuser) made t in $db, a slow BEFORE INSERT trigger on it, fast ingest on")
	  or diag($err);
}

# Commits $n hinted rows (ids $from ..) as ing_owner; returns the writer's watermark.
sub insert_hinted
{
	my ($db, $from, $n) = @_;
	my $to = $from + $n - 1;
	my ($rc, $out, $err) = psql_as($db, 'ing_owner', qq{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO public.t SELECT g, 'row ' || g FROM generate_series($from, $to) g;
SELECT aq.get_write_hwm_seqid();
});
	is($rc . $err, '0', "$db: $n hinted rows (ids $from..$to) committed as ing_owner: acknowledged, in the ring")
	  or diag($err);
	return $out;
}

# The drain of $db, waiting for a lock in t's trigger.
sub blocked_drain
{
	my ($db, $wait) = @_;
	return qq{
SELECT a.pid FROM pg_stat_activity a
 WHERE a.backend_type = 'aq fast ingest drain' AND a.datname = '$db' AND $wait};
}
my $on_advisory = q{EXISTS (SELECT FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory' AND NOT l.granted)};

# ============================================================================ 1. pg_terminate_backend
make_database('ing', 'PERFORM pg_catalog.pg_advisory_xact_lock(4242);');
{
	my $lock = session('ing');
	is(query($lock, 'SELECT pg_advisory_lock(4242);'), '', '1: the test holds the advisory lock (in ing)');
	my $log_offset = -s $node->logfile;
	my $t_insert   = time;
	my $hwm        = insert_hinted('ing', 1, 100);
	ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM (" . blocked_drain('ing', $on_advisory) . ") s"),
		"1: the drain of ing waits for the advisory lock in ing_owner's trigger");
	ok($node->poll_query_until('postgres', qq{
WITH s AS MATERIALIZED (} . blocked_drain('ing', $on_advisory) . qq{),
     k AS (INSERT INTO terminated SELECT pid FROM s WHERE pg_terminate_backend(pid) RETURNING pid)
SELECT count(*) = 1 FROM k}), '1: pg_terminate_backend of the drain blocked in the trigger');
	my $t0  = time;
	my $pid = $node->safe_psql('postgres', 'SELECT pid FROM terminated');
	ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
		'1: the terminated drain is gone (polled)');
	my $dt = time - $t0;
	diag(sprintf('1: the terminated drain was gone after %s', ms($dt)));
	cmp_ok($dt, '<', 20,
		'1: within the ten seconds a terminated drain has left (a run budget after a deferral is 10 s .. 320 s)');
	my $log = slurp_file($node->logfile, $log_offset);
	my $table = $node->safe_psql('ing', q{SELECT 'public.t'::regclass::oid});
	my @deferred = $log =~ /^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) UTC \[$pid\] LOG:  aq: fast-ingest rows \d+\.\. \(100 rows\) of table $table stay in the ring: the drain was terminated/mg;
	ok(@deferred >= 1, "1: the log shows the terminated drain's run in t (its trigger) ended, its rows kept in the ring");
	# The run started after the rows' commit; its first deferral came less than the first run
	# budget (5 s) after that commit, so SIGTERM ended it, not the budget.
	my ($y, $mo, $d, $h, $mi, $sec) = ($deferred[0] // '1970-01-01 00:00:00') =~ /^(\d+)-(\d+)-(\d+) (\d+):(\d+):([\d.]+)$/;
	my $t_deferred = timegm(0, $mi, $h, $d, $mo - 1, $y) + $sec;
	cmp_ok($t_deferred - $t_insert, '<', 5,
		'1: SIGTERM ended the run inside the trigger (its first deferral came before any budget could run out)');
	diag(sprintf('1: the terminated drain stopped %d run(s) of the same 100 rows before it exited', scalar @deferred));
	unlike($log, qr/\[$pid\] (?:ERROR|FATAL|PANIC)/, '1: no error of the terminated drain');
	is($node->safe_psql('ing', 'SELECT count(*) FROM t'), '0', '1: nothing applied while the lock is held');
	is(query($lock, 'SELECT pg_advisory_unlock(4242);'), 't', '1: the test releases the lock');
	finish($lock);
	$t0 = time;
	ok($node->poll_query_until('ing', "SELECT count(*) = 100 FROM t"),
		'1: a new drain (the launcher restarts it) applies the 100 rows');
	diag(sprintf('1: the rows were applied %s after the lock was released', ms(time - $t0)));
	ok($node->poll_query_until('ing', "SELECT aq.get_apply_hwm_seqid() >= $hwm"),
		"1: the apply watermark reaches the writer's ($hwm)");
	is($node->safe_psql('ing', q{
SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || min(id) || ' ' || max(id) || ' ' || bool_and(note = 'row ' || id) FROM t}),
		'100 100 1 100 true', '1: none lost, none twice: ids 1..100, each once, as written');
	is($node->safe_psql('ing', q{SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || string_agg(DISTINCT who, ',') FROM t_passes}),
		'100 100 ing_owner', "1: the trigger passed once per applied row (committed), as ing_owner");
	is($node->safe_psql('ing', q{
SELECT (SELECT count(*) FROM aq.fast_ingest_rejects) || ' ' || rejected_rows FROM aq.memoptimize_write_area}),
		'0 0', '1: none rejected (aq.fast_ingest_rejects empty, rejected_rows 0)');
	isnt($node->safe_psql('postgres', q{
SELECT pid FROM pg_stat_activity WHERE backend_type = 'aq fast ingest drain' AND datname = 'ing'}), $pid,
		'1: (and it was another drain process)');
}

# ============================================================================ 2. DROP DATABASE ... WITH (FORCE)
# Runs DROP DATABASE $db WITH (FORCE) from postgres while its drain is blocked in the trigger.
sub drop_force
{
	my ($db, $what) = @_;
	my $t0 = time;
	my ($rc, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\nDROP DATABASE $db WITH (FORCE)");
	my $dt = time - $t0;
	diag(sprintf("2$what: DROP DATABASE $db WITH (FORCE) took %s", ms($dt)));
	is($rc . $err, '0', "2$what: DROP DATABASE $db WITH (FORCE) succeeds while its drain waits in the trigger (no 55006)")
	  or diag($err);
	return is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = '$db'"), '0',
		"2$what: $db is gone");
}
my $dropped = 0;

# 2a. The trigger waits for an advisory lock held by a session of `gone`.
make_database('gone', 'PERFORM pg_catalog.pg_advisory_xact_lock(4242);');
{
	my $lock = session('gone');
	is(query($lock, 'SELECT pg_advisory_lock(4242);'), '', '2a: the test holds the advisory lock (in gone)');
	insert_hinted('gone', 1, 50);
	ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM (" . blocked_drain('gone', $on_advisory) . ") s"),
		"2a: the drain of gone waits for the advisory lock in ing_owner's trigger");
	$dropped += drop_force('gone', 'a');
	$lock->{h}->finish;    # FORCE ended its connection
}

# 2b. The trigger is slow by itself: nothing that FORCE ends releases it.
make_database('gone2', 'PERFORM pg_catalog.pg_sleep(3600);');
{
	insert_hinted('gone2', 1, 50);
	ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM (" . blocked_drain('gone2', q{a.wait_event = 'PgSleep'}) . ") s"),
		"2b: the drain of gone2 sits in ing_owner's slow trigger");
	$dropped += drop_force('gone2', 'b');
}
SKIP:
{
	skip 'a database was not dropped: its rows stay in the ring', 1 if $dropped < 2;
	ok($node->poll_query_until('ing', 'SELECT rows_buffered = 0 FROM aq.memoptimize_write_area'),
		"2: the dropped databases' rows are released from the ring (the launcher finds them gone)");
}
{
	my ($rc, $out, $err) = $node->psql('ing', q{
ALTER TABLE t DISABLE TRIGGER t_slow;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t VALUES (101, 'row 101');
SELECT aq.write_end('60 s');
SELECT count(*) FROM t WHERE id = 101;
SELECT aq.get_apply_hwm_seqid() >= aq.get_write_hwm_seqid();
}, on_error_stop => 1);
	is($rc . $err . $out, "0\n1\nt", '2: the server is healthy: a later hinted insert in ing is applied (aq.write_end)')
	  or diag($err);
}

# ============================================================================ 3. the server log
$node->stop;
my $log = slurp_file($node->logfile);
sub log_clean
{
	my ($re, $name) = @_;
	my @hits = grep { /$re/ } split /\n/, $log;
	ok(!@hits, $name) or diag(join("\n", @hits[ 0 .. ($#hits < 9 ? $#hits : 9) ]));
}
log_clean(qr/PANIC|TRAP:|terminated by signal|exited with exit code (?![01]\b)\d+/,
	'3: no PANIC, no failed assertion, no process ended by a signal');
log_clean(qr/\bXX000\b/, '3: no internal error (XX000)');
log_clean(qr/\b55006\b|is being accessed by other users/, '3: no 55006 (database in use)');
note sprintf('%.1f s in all', time - $t_start);
done_testing();
