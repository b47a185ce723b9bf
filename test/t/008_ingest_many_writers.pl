# Fast ingest (MEMOPTIMIZE_WRITE) with many concurrent writers.
#
# $n_writers psql processes write into one fast-ingest table at the same time, each until
# $rows_per_writer rows are committed: single-row autocommit INSERTs, multi-statement
# transactions (multi-row VALUES, INSERT ... SELECT, PL/pgSQL loops) of which about one in
# six is rolled back, and INSERT ... SELECT in autocommit.  One writer uses
# aq.memoptimize_write = on (no hint) instead of the hint.  The ring is small
# (aq.fast_ingest_buffer = 2MB) so that it wraps around several times during the run, and
# the drain keeps rows for 1 s (aq.fast_ingest_drain_delay): the ring holds a fair share
# of it and commits may have to wait for space (aq.fast_ingest_wait_timeout = 60s).
# Every id is unique (writer * 1e6 + n) and its payload is derived from it, so the
# client knows exactly which rows were committed.
# Writers 3 and 7 (w % 4 = 3) write into a second database, ingest_db2 (its own drain
# worker and apply watermark).
# After each transaction the writer prints aq.get_write_hwm_seqid(): it must grow after
# every commit and stay the same after a rollback.  At the end the even writers call
# aq.write_end() and must then see all of their committed rows and
# aq.get_apply_hwm_seqid() >= their aq.get_write_hwm_seqid(); the odd ones just end.
# A final session in the first database calls aq.writes_flush() (which covers every
# database) and checks, in both databases: every committed row present exactly once, with
# its payload intact, no rolled-back row, nothing rejected, the database's apply hwm >= the
# write hwm of each of its writers, and the aq.memoptimize_write_area counters agree
# (applied_rows = committed rows, nothing buffered).
# Then: COMMIT / ROLLBACK inside a procedure; writes_flush in one database waiting for rows
# of the other (held back by a 3 s drain delay); subtransactions (rows of a rolled-back
# savepoint or of a PL/pgSQL block that caught an exception are never applied, the others
# are); a full ring (drain held back: a commit that finds no space fails with 53000 after
# aq.fast_ingest_wait_timeout and none of its rows is applied).
# Environment: AQ_TAP_INGEST_WRITERS (8), AQ_TAP_INGEST_ROWS (5000 per writer).
use strict;
use warnings;

use Time::HiRes qw(time usleep);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $n_writers       = $ENV{AQ_TAP_INGEST_WRITERS} // 8;
my $rows_per_writer = $ENV{AQ_TAP_INGEST_ROWS}    // 5000;
my $tmp             = PostgreSQL::Test::Utils::tempdir;
my $t_start         = time;

my $node = PostgreSQL::Test::Cluster->new('ingest_many_writers');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
aq.fast_ingest_buffer = '2MB'
aq.fast_ingest_drain_delay = 1000
aq.fast_ingest_wait_timeout = '60s'
max_connections = 40
autovacuum = off
log_statement = none
));
$node->start;
my $log_start = -s $node->logfile;

my @dbs = ('postgres', 'ingest_db2');
$node->safe_psql('postgres', 'CREATE DATABASE ingest_db2');
for my $db (@dbs)
{
	$node->safe_psql($db, q{
CREATE EXTENSION aq;
CREATE TABLE ingest_t (id bigint NOT NULL, writer int NOT NULL, payload text NOT NULL);
SELECT aq.enable_fast_ingest('ingest_t');
CREATE TABLE expected_ranges (lo bigint NOT NULL, hi bigint NOT NULL);
});
}
sub db_of { my ($w) = @_; return $w % 4 == 3 ? 'ingest_db2' : 'postgres'; }
sub waits { my ($w) = @_; return $w % 2 == 0; }    # this writer calls write_end

sub payload_sql { my ($expr, $w) = @_; return "'w$w-' || ($expr)::text || '-' || repeat('x', (($expr) % 17)::int)"; }
sub payload_lit { my ($id, $w) = @_; return "'w$w-$id-" . ('x' x ($id % 17)) . "'"; }

# Writes the script of writer $w; returns the committed id ranges ([lo, hi], ...) and the
# list of transactions (1 = committed with rows, 0 = rolled back), in script order.
sub make_script
{
	my ($w, $file) = @_;
	srand(4242 + $w);
	my $hint = ($w == $n_writers - 1 && $n_writers > 1) ? '' : '/*+ MEMOPTIMIZE_WRITE */ ';
	my $next = $w * 1_000_000;
	my $committed = 0;
	my (@ranges, @tx);
	open(my $fh, '>', $file) or die "$file: $!";
	print $fh "SET aq.memoptimize_write = on;\n" if $hint eq '';
	print $fh "SELECT 'start', coalesce(aq.get_write_hwm_seqid()::text, 'null');\n";
	my $insert = "INSERT ${hint}INTO ingest_t (id, writer, payload)";
	# One statement inserting $n new rows; returns (sql, lo, hi).
	my $statement = sub {
		my ($n) = @_;
		my ($lo, $hi) = ($next + 1, $next + $n);
		$next = $hi;
		my $r = rand();
		my $sql;
		if ($n <= 5 && $r < 0.6)
		{
			$sql = "$insert VALUES "
			  . join(', ', map { "($_, $w, " . payload_lit($_, $w) . ")" } $lo .. $hi) . ";";
		}
		elsif ($r < 0.85)
		{
			$sql = "$insert SELECT g, $w, " . payload_sql('g', $w)
			  . " FROM generate_series($lo, $hi) g;";
		}
		else
		{
			# PL/pgSQL: the hint inside a function body (one INSERT per row).
			$sql = "DO \$\$ BEGIN FOR i IN $lo..$hi LOOP $insert VALUES (i, $w, "
			  . payload_sql('i', $w) . "); END LOOP; END \$\$;";
		}
		return ($sql, $lo, $hi);
	};
	while ($committed < $rows_per_writer)
	{
		my $r = rand();
		if ($r < 0.45)
		{
			my ($sql, $lo, $hi) = $statement->(1);
			print $fh "$sql\n";
			push @ranges, [ $lo, $hi ];
			$committed += $hi - $lo + 1;
			push @tx, 1;
		}
		elsif ($r < 0.9)
		{
			my $n_stmt   = 1 + int(rand(6));
			my $rollback = rand() < 0.17;
			my @sub;
			print $fh "BEGIN;\n";
			for (1 .. $n_stmt)
			{
				my ($sql, $lo, $hi) = $statement->(1 + int(rand(rand() < 0.5 ? 5 : 40)));
				print $fh "$sql\n";
				push @sub, [ $lo, $hi ];
			}
			print $fh($rollback ? "ROLLBACK;\n" : "COMMIT;\n");
			if (!$rollback)
			{
				push @ranges, @sub;
				$committed += $_->[1] - $_->[0] + 1 for @sub;
			}
			push @tx, $rollback ? 0 : 1;
		}
		else
		{
			my ($sql, $lo, $hi) = $statement->(10 + int(rand(90)));
			print $fh "$sql\n";
			push @ranges, [ $lo, $hi ];
			$committed += $hi - $lo + 1;
			push @tx, 1;
		}
		print $fh "SELECT 'tx', coalesce(aq.get_write_hwm_seqid()::text, 'null');\n";
	}
	print $fh "SELECT 'write_hwm', aq.get_write_hwm_seqid();\n";
	if (waits($w))
	{
		print $fh "SELECT 'write_end', 'done' FROM (SELECT aq.write_end('60 s')) w;\n";
		print $fh "SELECT 'visible', count(*) FROM ingest_t WHERE writer = $w;\n";
		print $fh "SELECT 'apply_hwm', aq.get_apply_hwm_seqid();\n";
	}
	close $fh;
	return (\@ranges, \@tx, $committed);
}

my (@handles, @out, @err, @ranges, @txs, @committed);
for my $w (0 .. $n_writers - 1)
{
	my $script = "$tmp/writer_$w.sql";
	my ($ranges, $tx, $committed) = make_script($w, $script);
	push @ranges,    $ranges;
	push @txs,       $tx;
	push @committed, $committed;
	push @out,       '';
	push @err,       '';
}
# Start all writers at once (each connects, then runs its script).
for my $w (0 .. $n_writers - 1)
{
	push @handles,
	  IPC::Run::start(
		[ 'psql', '-X', '-q', '-A', '-t', '-F', ' ', '-v', 'ON_ERROR_STOP=1',
		  '-d', $node->connstr(db_of($w)), '-f', "$tmp/writer_$w.sql" ],
		'<', \undef, '>', "$tmp/writer_$w.out", '2>', "$tmp/writer_$w.err",
		IPC::Run::timeout(180));
}
my @rc;
for my $w (0 .. $n_writers - 1)
{
	$handles[$w]->finish;
	push @rc, $handles[$w]->result(0);
}
# (The output goes to files: pipes that nobody reads while all writers run would fill up
# and stall the writers.)
@out = map { slurp_file("$tmp/writer_$_.out") } 0 .. $n_writers - 1;
@err = map { slurp_file("$tmp/writer_$_.err") } 0 .. $n_writers - 1;
my $t_written = time;
note sprintf('%d writers wrote %d committed rows in %.1f s', $n_writers, eval { my $s = 0; $s += $_ for @committed; $s },
	$t_written - $t_start);

my $epoch = $node->safe_psql('postgres', 'SELECT epoch FROM aq.memoptimize_write_area');
like($epoch, qr/^\d+$/, "aq.memoptimize_write_area shows the epoch ($epoch)");

my @write_hwms;
for my $w (0 .. $n_writers - 1)
{
	is($rc[$w] . $err[$w], '0', "writer $w: psql ran its script without an error");
	my %v;
	my @tx_hwm;
	my $start;
	for my $line (split /\n/, $out[$w])
	{
		if ($line =~ /^tx (\S+)$/) { push @tx_hwm, $1; }
		elsif ($line =~ /^start (\S+)$/) { $start = $1; }
		elsif ($line =~ /^(write_hwm|write_end|visible|apply_hwm) ?(\S*)$/) { $v{$1} = $2; }
	}
	is($start, 'null', "writer $w: aq.get_write_hwm_seqid() is NULL before the first fast-ingest commit");
	is(scalar(@tx_hwm), scalar(@{ $txs[$w] }), "writer $w: one write hwm per transaction");
	# The write hwm grows with every committed transaction and stays put after a rollback.
	my @bad;
	my $prev = 'null';
	for my $i (0 .. $#tx_hwm)
	{
		my $h = $tx_hwm[$i];
		if ($txs[$w][$i])
		{
			push @bad, "tx $i committed: hwm $prev -> $h"
			  unless $h =~ /^\d+$/ && ($prev eq 'null' || $h > $prev);
		}
		else
		{
			push @bad, "tx $i rolled back: hwm $prev -> $h" unless $h eq $prev;
		}
		$prev = $h;
	}
	is(join("\n", @bad[ 0 .. ($#bad < 5 ? $#bad : 5) ]), '',
		"writer $w: write hwm grows after each commit, unchanged after each rollback");
	is($v{write_hwm}, $prev, "writer $w: final aq.get_write_hwm_seqid() is the last transaction's");
	ok(defined $v{write_hwm} && $v{write_hwm} =~ /^\d+$/ && ($v{write_hwm} >> 40) == $epoch,
		"writer $w: the write hwm ($v{write_hwm}) carries the epoch $epoch in its top bits");
	if (waits($w))
	{
		is($v{write_end}, 'done', "writer $w: aq.write_end() returned");
		is($v{visible}, $committed[$w], "writer $w: after write_end all $committed[$w] committed rows are visible to the writer");
		ok(defined $v{apply_hwm} && $v{apply_hwm} =~ /^\d+$/ && $v{write_hwm} =~ /^\d+$/
			  && $v{apply_hwm} >= $v{write_hwm},
			"writer $w: after write_end aq.get_apply_hwm_seqid() ($v{apply_hwm}) >= aq.get_write_hwm_seqid() ($v{write_hwm})");
	}
	push @write_hwms, $v{write_hwm};
}

# ---------------------------------------------------------------- global checks
note 'rows_buffered before writes_flush: '
  . $node->safe_psql('postgres', 'SELECT rows_buffered FROM aq.memoptimize_write_area');
my $flush_t0 = time;
$node->safe_psql('postgres', "SELECT aq.writes_flush('60 s')");
note sprintf('writes_flush returned after %.2f s', time - $flush_t0);

my $total = 0;
$total += $_ for @committed;
for my $db (@dbs)
{
	my @mine = grep { db_of($_) eq $db } 0 .. $n_writers - 1;
	my @values = map { my $w = $_; map { "($_->[0], $_->[1])" } @{ $ranges[$w] } } @mine;
	while (my @chunk = splice(@values, 0, 2000))
	{
		$node->safe_psql($db, 'INSERT INTO expected_ranges VALUES ' . join(',', @chunk));
	}
	my $want = 0;
	$want += $committed[$_] for @mine;

	my $res = $node->safe_psql($db, q{
WITH e AS (SELECT g AS id FROM expected_ranges, generate_series(lo, hi) g)
SELECT (SELECT count(*) FROM e),
       (SELECT count(*) FROM ingest_t),
       (SELECT count(DISTINCT id) FROM ingest_t),
       (SELECT count(*) FROM e WHERE NOT EXISTS (SELECT FROM ingest_t t WHERE t.id = e.id)),
       (SELECT count(*) FROM ingest_t t WHERE NOT EXISTS (SELECT FROM e WHERE e.id = t.id)),
       (SELECT count(*) FROM ingest_t WHERE writer <> id / 1000000
           OR payload <> 'w' || writer || '-' || id || '-' || repeat('x', (id % 17)::int)),
       (SELECT count(*) FROM aq.fast_ingest_rejects)
});
	my ($n_expected, $n_rows, $n_distinct, $n_missing, $n_extra, $n_corrupt, $n_rejects) = split /\|/, $res;
	is($n_expected, $want, "$db: the client's committed ranges cover $want rows (writers @mine)");
	is($n_rows, $want, "$db: after writes_flush the table has exactly the $want committed rows");
	is($n_distinct, $n_rows, "$db: no row is present twice (count = count distinct id)");
	is($n_missing, 0, "$db: no committed row is missing");
	is($n_extra, 0, "$db: no rolled-back (or never written) row is present");
	is($n_corrupt, 0, "$db: every row has the writer and payload it was written with");
	is($n_rejects, 0, "$db: nothing was rejected");

	my $apply = $node->safe_psql($db, 'SELECT aq.get_apply_hwm_seqid()');
	my @hwms = map { $write_hwms[$_] // 'none' } @mine;
	my @behind = grep { !($apply =~ /^\d+$/ && $write_hwms[$_] =~ /^\d+$/ && $apply >= $write_hwms[$_]) } @mine;
	is("@behind", '', "$db: after writes_flush aq.get_apply_hwm_seqid() ($apply) >= the write hwm of each of its writers (@hwms)");
}
my ($max_write) = sort { $b <=> $a } grep { defined && /^\d+$/ } @write_hwms;

my $area = $node->safe_psql('postgres',
	'SELECT applied_rows, rejected_rows, rows_buffered, total_bytes, used_bytes + free_bytes, apply_hwm, write_hwm, writers'
	  . ' FROM aq.memoptimize_write_area');
my ($a_applied, $a_rejected, $a_buffered, $a_total, $a_used_free, $a_apply, $a_write, $a_writers) = split /\|/, $area;
is($a_writers, 0, 'memoptimize_write_area.writers = 0 once every writer has finished');
is($a_applied,  $total, "memoptimize_write_area.applied_rows = $total (every row went through fast ingest)");
is($a_rejected, 0,      'memoptimize_write_area.rejected_rows = 0');
is($a_buffered, 0,      'memoptimize_write_area.rows_buffered = 0 after writes_flush');
is($a_used_free, $a_total, 'used_bytes + free_bytes = total_bytes');
cmp_ok($a_total, '<=', 2 * 1024 * 1024 + 65536, "the ring is the configured 2MB ($a_total bytes)");
# apply_hwm is this database's (aq.get_apply_hwm_seqid()); write_hwm is the last id handed
# out in the whole cluster (the other database may have written later ids).
is($a_apply, $node->safe_psql('postgres', 'SELECT aq.get_apply_hwm_seqid()'),
	'memoptimize_write_area.apply_hwm is this database\'s aq.get_apply_hwm_seqid()');
ok($a_write =~ /^\d+$/ && $a_write >= $max_write,
	"memoptimize_write_area.write_hwm ($a_write) >= every session's write hwm (max $max_write)");

# ---------------------------------------------------------------- procedures
# Transaction control inside a procedure: each COMMIT sends its row to the ring, each
# ROLLBACK drops it (every third one).
$node->safe_psql('postgres', q{
CREATE PROCEDURE ingest_proc(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..n LOOP
    INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ingest_t VALUES (92000000 + i, 92, 'proc');
    IF i % 3 = 0 THEN ROLLBACK; ELSE COMMIT; END IF;
  END LOOP;
END $$;
CALL ingest_proc(30);
SELECT aq.write_end('30 s');
});
is($node->safe_psql('postgres', 'SELECT count(*), sum(id - 92000000) FROM ingest_t WHERE writer = 92'), '20|300',
	'procedure: the 20 committed rows were applied, the 10 rolled-back ones not');

# ---------------------------------------------------------------- writes_flush, other database
# With the drain holding rows for 3 s, rows committed in ingest_db2 are still pending
# when a session of the first database calls writes_flush: it must wait for them.
$node->safe_psql('postgres', 'ALTER SYSTEM SET aq.fast_ingest_drain_delay = 3000; SELECT pg_reload_conf()');
$node->poll_query_until('postgres',
	"SELECT setting = '3000' FROM pg_settings WHERE name = 'aq.fast_ingest_drain_delay'") or die 'reload';
usleep(500_000);
$node->safe_psql('ingest_db2',
	"INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ingest_t SELECT g, 91, 'late' FROM generate_series(91000001, 91000100) g");
my $pending = $node->safe_psql('ingest_db2', 'SELECT count(*) FROM ingest_t WHERE writer = 91');
$flush_t0 = time;
$node->safe_psql('postgres', "SELECT aq.writes_flush('30 s')");
my $flush_s = time - $flush_t0;
is($pending, '0', 'ingest_db2: 100 rows committed, none applied yet (3 s drain delay)');
is($node->safe_psql('ingest_db2', 'SELECT count(*), count(DISTINCT id) FROM ingest_t WHERE writer = 91'),
	'100|100', sprintf('writes_flush in postgres waited (%.1f s) until the rows of ingest_db2 were applied', $flush_s));
$node->safe_psql('postgres', 'ALTER SYSTEM RESET aq.fast_ingest_drain_delay; SELECT pg_reload_conf()');
$node->poll_query_until('postgres',
	"SELECT setting = '1000' FROM pg_settings WHERE name = 'aq.fast_ingest_drain_delay'") or die 'reload';

# ---------------------------------------------------------------- subtransactions
# Rows inserted in a rolled-back subtransaction are rolled back like any insert's.
$node->safe_psql('postgres', q{
BEGIN;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ingest_t VALUES (90000001, 90, 'sub-kept-1');
SAVEPOINT s1;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ingest_t VALUES (90000002, 90, 'sub-rolled-back');
ROLLBACK TO SAVEPOINT s1;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ingest_t VALUES (90000003, 90, 'sub-kept-3');
SAVEPOINT s2;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ingest_t VALUES (90000004, 90, 'sub-released-4');
RELEASE SAVEPOINT s2;
DO $$ BEGIN
  INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ingest_t VALUES (90000005, 90, 'sub-exception');
  RAISE EXCEPTION 'undo';
EXCEPTION WHEN raise_exception THEN NULL;
END $$;
COMMIT;
SELECT aq.write_end('30 s');
});
is($node->safe_psql('postgres', 'SELECT string_agg(id::text, \',\' ORDER BY id) FROM ingest_t WHERE writer = 90'),
	'90000001,90000003,90000004',
	'subtransactions: rows of ROLLBACK TO SAVEPOINT and of a caught PL/pgSQL exception are not applied; the others are');

# ---------------------------------------------------------------- a full ring
# With the drain held back (delay 10 min) two transactions fill most of the 2MB ring; a
# third, sized from the space the first two took to need more than is left (but less than
# the whole ring), cannot get space: after aq.fast_ingest_wait_timeout (1 s) its COMMIT
# fails with 53000 and it rolls back.  Once the drain may run, the two committed
# transactions are applied and nothing of the third.
$node->safe_psql('postgres', 'CREATE TABLE ring_t (id int NOT NULL, pad text); SELECT aq.enable_fast_ingest(\'ring_t\')');
$node->safe_psql('postgres', 'ALTER SYSTEM SET aq.fast_ingest_drain_delay = 600000; SELECT pg_reload_conf()');
$node->poll_query_until('postgres',
	"SELECT setting = '600000' FROM pg_settings WHERE name = 'aq.fast_ingest_drain_delay'") or die 'reload';
usleep(500_000);
$node->safe_psql('postgres', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ring_t SELECT g, repeat('x', 200) FROM generate_series(1, 3000) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ring_t SELECT g, repeat('x', 200) FROM generate_series(3001, 6000) g;
});
my ($r_buffered, $r_used, $r_free, $r_total) = split /\|/,
  $node->safe_psql('postgres', 'SELECT rows_buffered, used_bytes, free_bytes, total_bytes FROM aq.memoptimize_write_area');
is($r_buffered, 6000, "ring_t: 6000 rows wait in the ring ($r_used bytes used, $r_free free)");
my $per_row = $r_used / 6000;
my $n3 = int($r_free / $per_row) + 300;
ok($n3 * $per_row < $r_total * 0.9, "ring_t: a third transaction of $n3 rows needs more than the free space but fits in the ring");
my ($rc_ring, $out_ring, $err_ring) = $node->psql('postgres', qq{
SET aq.fast_ingest_wait_timeout = '1s';
\\set VERBOSITY verbose
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ring_t SELECT g, repeat('x', 200) FROM generate_series(6001, 6000 + $n3) g;
}, on_error_stop => 0);
like($err_ring, qr/ERROR:  53000: /, 'ring_t: the commit that finds no space fails with 53000 after the wait timeout');
$node->safe_psql('postgres', 'ALTER SYSTEM SET aq.fast_ingest_drain_delay = 1000; SELECT pg_reload_conf()');
$node->poll_query_until('postgres',
	"SELECT setting = '1000' FROM pg_settings WHERE name = 'aq.fast_ingest_drain_delay'") or die 'reload';
$node->safe_psql('postgres', "SELECT aq.writes_flush('30 s')");
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id), max(id) FROM ring_t'), '6000|6000|6000',
	'ring_t: the two committed transactions were applied, nothing of the one that failed');
is($node->safe_psql('postgres', 'SELECT rows_buffered, used_bytes, writers FROM aq.memoptimize_write_area'), '0|0|0',
	'ring_t: afterwards the ring is empty and no session counts as a writer');

# ---------------------------------------------------------------- server log
$node->stop;
my $log = slurp_file($node->logfile, $log_start);
unlike($log, qr/PANIC|TRAP:|terminated by signal|exited with exit code [^01]/,
	'the server log shows no PANIC, TRAP or abnormal process exit');
note sprintf('total %.1f s', time - $t_start);
done_testing();
