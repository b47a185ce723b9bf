# Fast ingest (MEMOPTIMIZE_WRITE): one table or role cannot starve the others (hardening 9: one
# hinted row into a low-privilege role's table whose trigger sleeps stalled fast ingest in every
# database; another database's commit waited 10 s and failed 53000).
#
# In database slow_db, role slow_owner (no special rights) owns slow_t, whose BEFORE INSERT
# trigger sleeps for as long as a flag says so (the fault being injected).  The ring is 1 MB.
#   1. slow_owner commits a row into slow_t: the drain's run for slow_t is cancelled at its time
#      budget and deferred; rows of another table of slow_db (fast_t) keep being applied.
#   2. slow_owner keeps committing rows into slow_t until its database's share of the ring is
#      full: its own commits then fail with 53000.
#   3. Meanwhile, in database postgres, hinted commits succeed promptly (a 3 s ring wait would
#      fail them) and their rows are applied.
#   4. The flag clears: every acknowledged row of slow_t is applied exactly once.
use strict;
use warnings;

use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use AqIngest qw(wait_for);

my $node = PostgreSQL::Test::Cluster->new('ingest_isolation');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
autovacuum = off
aq.fast_ingest_buffer = '1MB'
));
$node->start;
my $log_start = -s $node->logfile;

$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
CREATE TABLE other_t (id int PRIMARY KEY, pad text);
SELECT aq.enable_fast_ingest('other_t');
CREATE ROLE slow_owner LOGIN;
CREATE DATABASE slow_db;
});
$node->safe_psql('slow_db', q{
CREATE EXTENSION aq;
GRANT USAGE ON SCHEMA aq TO slow_owner;
GRANT CREATE ON SCHEMA public TO slow_owner;
CREATE TABLE slow_flag (slow boolean NOT NULL);
INSERT INTO slow_flag VALUES (true);
GRANT SELECT ON slow_flag TO slow_owner;
CREATE TABLE fast_t (id int PRIMARY KEY);
SELECT aq.enable_fast_ingest('fast_t');
});
my $as_slow = $node->connstr('slow_db') . ' user=slow_owner';
my ($rc, $out, $err) = $node->psql('slow_db', q{
CREATE TABLE slow_t (id int PRIMARY KEY, pad text);
CREATE FUNCTION slow_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WHILE (SELECT slow FROM public.slow_flag) LOOP
    PERFORM pg_sleep(0.1);
  END LOOP;
  RETURN NEW;
END $$;
CREATE TRIGGER slow BEFORE INSERT ON slow_t FOR EACH ROW EXECUTE FUNCTION slow_trigger();
SELECT aq.enable_fast_ingest('slow_t');
}, connstr => $as_slow, on_error_stop => 1);
is($rc . $err, '0', 'slow_owner made its table with a sleeping trigger') or diag($err);


# ------------------------------------------------------------------ 1.
($rc, $out, $err) = $node->psql('slow_db', q{INSERT /*+ MEMOPTIMIZE_WRITE */ INTO slow_t VALUES (1, 'first')},
	connstr => $as_slow, on_error_stop => 1);
is($rc . $err, '0', '1: slow_owner committed a row into slow_t') or diag($err);
my $slow_rows = 1;
ok(wait_for('the deferral of slow_t', 60, sub { slurp_file($node->logfile, $log_start) =~ /deferred: table \d+ took more than/ }),
	'1: the drain cancelled slow_t\'s run at its time budget and deferred its rows');
my $t0 = time;
($rc, $out, $err) = $node->psql('slow_db', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO fast_t SELECT generate_series(1, 100);
SELECT aq.write_end('20 s');
SELECT count(*) FROM fast_t;
}, on_error_stop => 1);
is($rc . $err, '0', sprintf('1: write_end of a session writing another table of slow_db returns (%.1f s)', time - $t0))
  or diag($err);
is((split /\n/, $out)[-1], '100', '1: rows of another table of the same database are applied meanwhile');

# ------------------------------------------------------------------ 2.
my $share_full = 0;
for my $i (1 .. 40)
{
	my $lo = 1000 * $i;
	my $hi = $lo + 99;
	($rc, $out, $err) = $node->psql('slow_db', qq{
SET aq.fast_ingest_wait_timeout = '500ms';
\\set VERBOSITY verbose
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO slow_t SELECT g, repeat('s', 1000) FROM generate_series($lo, $hi) g;
}, connstr => $as_slow, on_error_stop => 1);
	if ($rc != 0)
	{
		like($err, qr/53000.*share of the fast-ingest ring is full/s,
			"2: once slow_db holds its share of the ring its own commits fail with 53000 (after $i transactions)");
		$share_full = 1;
		last;
	}
	$slow_rows += 100;
}
ok($share_full, '2: slow_db\'s writers filled its share of the ring');

# ------------------------------------------------------------------ 3.
my $slowest = 0;
my $ok = 1;
for my $i (1 .. 10)
{
	my $lo = 100 * $i;
	my $hi = $lo + 99;
	my $t0 = time;
	($rc, $out, $err) = $node->psql('postgres', qq{
SET aq.fast_ingest_wait_timeout = '3s';
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO other_t SELECT g, repeat('o', 500) FROM generate_series($lo, $hi) g;
}, on_error_stop => 1);
	my $took = time - $t0;
	$slowest = $took if $took > $slowest;
	if ($rc != 0) { $ok = 0; diag($err); last; }
}
ok($ok, sprintf('3: every commit in database postgres succeeded while slow_db is stalled (slowest %.2f s)', $slowest));
($rc, $out, $err) = $node->psql('postgres', "SELECT aq.write_end('20 s')", on_error_stop => 1);
is($rc . $err, '0', '3: ... and its rows were applied (write_end)') or diag($err);
is($node->safe_psql('postgres', 'SELECT count(*) FROM other_t'), '1000', '3: all 1000 rows of other_t are there');
is($node->safe_psql('slow_db', 'SELECT count(*) FROM slow_t'), '0', '3: slow_t has nothing yet (still sleeping)');

# ------------------------------------------------------------------ 4.
$node->safe_psql('slow_db', 'UPDATE slow_flag SET slow = false');
($rc, $out, $err) = $node->psql('slow_db', "SELECT aq.writes_flush('180 s')", on_error_stop => 1);
is($rc . $err, '0', '4: once the trigger stops sleeping, the deferred rows are applied (writes_flush)') or diag($err);
is($node->safe_psql('slow_db', 'SELECT count(*), count(DISTINCT id) FROM slow_t'), "$slow_rows|$slow_rows",
	"4: every acknowledged row of slow_t ($slow_rows) applied exactly once");
is($node->safe_psql('slow_db', 'SELECT count(*) FROM aq.fast_ingest_rejects'), '0', '4: nothing was rejected');
cmp_ok($node->safe_psql('slow_db', 'SELECT aq.get_apply_hwm_seqid()'), '>=',
	$node->safe_psql('slow_db', 'SELECT max(applied_hwm) FROM aq.fast_ingest_progress'), '4: the watermarks agree');

unlike(slurp_file($node->logfile, $log_start), qr/terminated by signal|PANIC|TRAP:/, 'no process crashed');
$node->stop;
done_testing();
