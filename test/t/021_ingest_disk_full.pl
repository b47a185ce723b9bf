# Fast ingest (MEMOPTIMIZE_WRITE): a drain that can neither apply a row nor record it as
# rejected keeps it in the ring (hardening 16a: a full disk silently dropped acknowledged rows).
#
# The full disk is simulated, not made: a flag table says "the disk is full", and while it does,
# a BEFORE INSERT trigger (installed by the superuser) raises 53100 disk_full on
#   - aq.fast_ingest_rejects (the drain cannot record a reject), and
#   - table full_t in database postgres (the drain cannot apply a row to it).
# Table chk_t, in a second database (its own drain, its own rejects table with the same trigger),
# has no trigger (the multi-insert path) and a CHECK constraint; one of its rows violates it
# (23514: the row's own fault), so the drain wants to reject it and cannot.
#   1. Rows of both committed: both drains fail again and again (more attempts than the drain's
#      give-up limit), nothing is applied or rejected, get_apply_hwm_seqid() and the README's
#      "did my rows make it?" query never claim the rows.
#   2. More rows of full_t until the ring (1 MB) is full: writers get 53000 ("fast-ingest ring
#      is full"), as for any stalled drain; still nothing claimed.
#   3. The fault clears: every acknowledged row is applied exactly once, the bad row is in
#      aq.fast_ingest_rejects exactly once (23514), no row was rejected for 53100, and the
#      watermarks cover everything.
use strict;
use warnings;

use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use AqIngest qw(wait_for);

my $node = PostgreSQL::Test::Cluster->new('ingest_disk_full');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
autovacuum = off
aq.fast_ingest_buffer = '1MB'
));
$node->start;
my $log_start = -s $node->logfile;

my $setup = q{
CREATE EXTENSION aq;
CREATE TABLE disk_flag (is_full boolean NOT NULL);
INSERT INTO disk_flag VALUES (true);
CREATE FUNCTION disk_full_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (SELECT is_full FROM public.disk_flag) THEN
    RAISE EXCEPTION 'simulated disk full on %', TG_TABLE_NAME USING ERRCODE = 'disk_full';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER disk_full BEFORE INSERT ON aq.fast_ingest_rejects
  FOR EACH ROW EXECUTE FUNCTION disk_full_guard();
};
$node->safe_psql('postgres', 'CREATE DATABASE db2');
$node->safe_psql('postgres', $setup . q{
CREATE TABLE full_t (id int PRIMARY KEY, pad text);
CREATE TRIGGER disk_full BEFORE INSERT ON full_t FOR EACH ROW EXECUTE FUNCTION disk_full_guard();
SELECT aq.enable_fast_ingest('full_t');
});
$node->safe_psql('db2', $setup . q{
CREATE TABLE chk_t (id int PRIMARY KEY, v int CHECK (v >= 0));
SELECT aq.enable_fast_ingest('chk_t');
});

# Sequence ids of acknowledged (committed) rows: [first, last] per transaction, per database.
my %acked = (postgres => [], db2 => []);

sub hinted_commit
{
	my ($db, $sql, %opt) = @_;
	my $pre = $opt{pre} // '';
	return $node->psql($db, qq{
$pre
BEGIN;
$sql
COMMIT;
SELECT aq.get_write_hwm_seqid();
}, on_error_stop => 1);
}

sub failures_logged
{
	my $log = slurp_file($node->logfile, $log_start);
	my @r = ($log =~ /simulated disk full on fast_ingest_rejects/g);
	my @t = ($log =~ /simulated disk full on full_t/g);
	return (scalar(@r), scalar(@t));
}


sub ids_array
{
	my ($db) = @_;
	return 'ARRAY[' . join(',', map { $_->[1] } @{ $acked{$db} }) . ']::bigint[]';
}

# Nothing the drain could not store is claimed: the watermark stays below the first pending id
# and the README's query answers true for no acknowledged transaction.
sub nothing_claimed
{
	my ($label, $db, $table) = @_;
	my $lowest = $acked{$db}[0][0];
	my $hwm = $node->safe_psql($db, 'SELECT aq.get_apply_hwm_seqid()');
	cmp_ok($hwm, '<', $lowest, "$label: $db: get_apply_hwm_seqid() ($hwm) stays below the first pending id ($lowest)");
	my $ids = ids_array($db);
	my $claimed = $node->safe_psql($db, qq{
SELECT count(*) FROM unnest($ids) AS my(hwm)
WHERE (SELECT my.hwm <= applied_hwm FROM aq.fast_ingest_progress WHERE epoch = aq.seqid_epoch(my.hwm))});
	is($claimed, '0', "$label: $db: the README's \"did my rows up to :my_hwm make it?\" query answers true for none");
	is($node->safe_psql($db, "SELECT count(*) FROM $table"), '0', "$label: $db: nothing was applied to $table");
	is($node->safe_psql($db, 'SELECT count(*) FROM aq.fast_ingest_rejects'), '0', "$label: $db: nothing was rejected");
}

# ------------------------------------------------------------------ 1. nothing can be stored
my ($rc, $out, $err) = hinted_commit('db2', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO chk_t SELECT g, g FROM generate_series(1, 49) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO chk_t VALUES (50, -1);
});
is($rc . $err, '0', '1: db2: 50 rows of chk_t (one violates its CHECK) committed') or diag($err);
push @{ $acked{db2} }, [$out - 49, $out];
($rc, $out, $err) = hinted_commit('postgres', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO full_t SELECT g, 'x' FROM generate_series(1, 100) g;
});
is($rc . $err, '0', '1: postgres: 100 rows of full_t committed') or diag($err);
push @{ $acked{postgres} }, [$out - 99, $out];
ok(wait_for('seven failed drain attempts in each database', 90,
		sub { my ($r, $t) = failures_logged(); $r >= 7 && $t >= 7 }),
	'1: both drains failed more often than their give-up limit: db2 storing the reject, postgres applying full_t');
nothing_claimed('1', 'db2', 'chk_t');
nothing_claimed('1', 'postgres', 'full_t');

# ------------------------------------------------------------------ 2. the ring fills
my $next_id = 1000;
my $ring_full = 0;
for my $i (1 .. 40)
{
	my $lo = $next_id;
	my $hi = $next_id + 99;
	($rc, $out, $err) = hinted_commit('postgres', qq{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO full_t SELECT g, repeat('p', 1000) FROM generate_series($lo, $hi) g;
}, pre => "SET aq.fast_ingest_wait_timeout = '200ms';");
	if ($rc != 0)
	{
		like($err, qr/fast-ingest ring is full/, "2: once the ring is full a commit fails (after $i transactions)");
		$ring_full = 1;
		last;
	}
	push @{ $acked{postgres} }, [$out - 99, $out];
	$next_id += 100;
}
ok($ring_full, '2: the ring filled up and writers got an error instead of losing rows');
($rc, $out, $err) = $node->psql('postgres', q{
SET aq.fast_ingest_wait_timeout = '200ms';
\set VERBOSITY verbose
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO full_t VALUES (999999, repeat('p', 100000));
}, on_error_stop => 1);
like($err, qr/53000/, '2: the error is 53000 (insufficient resources), as for any full ring');
my $acked_full = 100 + ($next_id - 1000);
nothing_claimed('2', 'db2', 'chk_t');
nothing_claimed('2', 'postgres', 'full_t');

# ------------------------------------------------------------------ 3. the disk has room again
$node->safe_psql($_, 'UPDATE disk_flag SET is_full = false') for ('postgres', 'db2');
($rc, $out, $err) = $node->psql('postgres', "SELECT aq.writes_flush('120 s')", on_error_stop => 1);
is($rc . $err, '0', '3: writes_flush returns once the fault is gone') or diag($err);
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id) FROM full_t'), "$acked_full|$acked_full",
	"3: every acknowledged row of full_t ($acked_full) applied exactly once");
is($node->safe_psql('db2', 'SELECT count(*), count(DISTINCT id), min(id), max(id) FROM chk_t'), '49|49|1|49',
	'3: the 49 good rows of chk_t applied exactly once');
is($node->safe_psql('db2', "SELECT count(*), string_agg(sqlstate, ',') FROM aq.fast_ingest_rejects"),
	'1|23514', '3: the bad row is rejected exactly once, with its own error (23514)');
is($node->safe_psql('postgres', 'SELECT count(*) FROM aq.fast_ingest_rejects'),
	'0', '3: no row was rejected for the full disk');
for my $db ('postgres', 'db2')
{
	my $ids = ids_array($db);
	cmp_ok($node->safe_psql($db, 'SELECT aq.get_apply_hwm_seqid()'), '>=', $acked{$db}[-1][1],
		"3: $db: the apply watermark now covers every acknowledged row");
	is($node->safe_psql($db, qq{
SELECT bool_and(my.hwm <= p.applied_hwm) FROM unnest($ids) AS my(hwm)
JOIN aq.fast_ingest_progress p ON p.epoch = aq.seqid_epoch(my.hwm)}), 't',
		"3: $db: the README's query now answers true for every acknowledged transaction");
}

my $log = slurp_file($node->logfile, $log_start);
unlike($log, qr/terminated by signal|PANIC|TRAP:/, 'no process crashed');
unlike($log, qr/rejected after \d+ attempts/, 'the drain never gave up on the rows');

$node->stop;
done_testing();
