# Fast ingest (MEMOPTIMIZE_WRITE): ids and epochs never repeat across restarts, a pg_basebackup
# copy and a promotion, and the README's "did my rows up to :my_hwm make it?" query never
# answers true for a row that is not in the table (hardening 16b: the epoch counter, a file that
# pg_basebackup copies, made both sides run the same epoch and reissue the same ids).
#
#   A. primary: rows applied (write_end).  A standby is made with pg_basebackup (streaming).
#   B. both restart (routine restarts: on 0.4.0 both sides then ran the same epoch); primary:
#      rows applied, then rows acknowledged but held in the ring (the drain waits for a lock
#      on aq.fast_ingest_progress that another session holds); the standby catches up; the
#      primary crashes (immediate stop).
#   C. the standby is promoted and takes rows; it crash-restarts and takes more.
#   D. the old primary is started again on its own (the split brain of a failover gone wrong)
#      and takes rows.
# Checks: every id handed out anywhere is distinct; the promoted standby's epochs are not the
# old primary's; on each server, the README query answers true only for rows that are in the
# table (and for every row applied there), never for the lost ones.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('ingest_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
autovacuum = off
));
$primary->start;
$primary->safe_psql('postgres', q{
CREATE EXTENSION aq;
CREATE TABLE ft (id int PRIMARY KEY, phase text NOT NULL);
SELECT aq.enable_fast_ingest('ft');
});

# Inserts rows $lo..$hi, one transaction each; returns { id => seqid } (acknowledged rows).
sub write_rows
{
	my ($node, $phase, $lo, $hi, $wait) = @_;
	my $sql = join '', map {
		"INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ft VALUES ($_, '$phase'); SELECT $_, aq.get_write_hwm_seqid();\n"
	} $lo .. $hi;
	$sql .= "SELECT 'end', aq.write_end('60 s');\n" if $wait;
	my $out = $node->safe_psql('postgres', $sql);
	my %ids;
	for (split /\n/, $out)
	{
		my ($id, $seq) = split /\|/;
		$ids{$id} = $seq if $id ne 'end';
	}
	is(scalar(keys %ids), $hi - $lo + 1, "$phase: " . ($hi - $lo + 1) . ' rows acknowledged on ' . $node->name);
	return \%ids;
}

# The README's query for each acknowledged row, on $node: 't' only if the row is in ft.
sub check_truth
{
	my ($node, $label, $ids, $expect_present) = @_;
	my $values = join ',', map { "($_, $ids->{$_})" } sort { $a <=> $b } keys %$ids;
	my $out = $node->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE stored AND present),
       count(*) FILTER (WHERE stored AND NOT present),
       count(*) FILTER (WHERE present)
FROM (SELECT coalesce((SELECT v.seq <= p.applied_hwm FROM aq.fast_ingest_progress p
                       WHERE p.epoch = aq.seqid_epoch(v.seq)), false) AS stored,
             EXISTS (SELECT FROM ft WHERE ft.id = v.id) AS present
      FROM (VALUES $values) AS v(id, seq)) s});
	my ($true_present, $true_absent, $present) = split /\|/, $out;
	is($true_absent, '0', "$label: the README query never answers true for a row that is not in the table");
	my $n = scalar(keys %$ids);
	if ($expect_present)
	{
		is($present, $n, "$label: all $n rows are in the table");
		is($true_present, $n, "$label: ... and the README query answers true for each");
	}
	else
	{
		is($present, '0', "$label: none of the $n lost rows is in the table");
	}
}

sub epoch_of { return $_[0] >> 40; }

# ------------------------------------------------------------------ A.
my %all;    # phase => ids
$all{A} = write_rows($primary, 'A', 1, 50, 1);
$primary->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('ingest_standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);

# ------------------------------------------------------------------ B.
$primary->restart;
$standby->restart;
$all{B} = write_rows($primary, 'B', 101, 150, 1);
my $locker = $primary->background_psql('postgres');
$locker->query_safe('BEGIN; LOCK TABLE aq.fast_ingest_progress IN EXCLUSIVE MODE');
$all{lost} = write_rows($primary, 'lost', 201, 250, 0);
$primary->poll_query_until('postgres',
	"SELECT count(*) > 0 FROM pg_locks WHERE relation = 'aq.fast_ingest_progress'::regclass AND NOT granted")
  or die 'the drain never waited for the lock';
$primary->wait_for_catchup($standby);
$primary->stop('immediate');
eval { $locker->quit; 1 };

# ------------------------------------------------------------------ C.
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'promotion failed';
$all{C} = write_rows($standby, 'C', 301, 350, 1);
$standby->stop('immediate');
$standby->start;
$all{C2} = write_rows($standby, 'C2', 401, 450, 1);

# ------------------------------------------------------------------ D.
$primary->start;
$all{D} = write_rows($primary, 'D', 501, 550, 1);

# ------------------------------------------------------------------ checks
my %seen;
my $repeats = 0;
for my $phase (sort keys %all)
{
	for my $seq (values %{ $all{$phase} })
	{
		$repeats++ if $seen{$seq}++;
	}
}
is($repeats, 0, 'no sequence id was handed out twice (primary, standby, restarts, promotion, split brain)');
my %old_epochs = map { (epoch_of($_) => 1) } map { values %{ $all{$_} } } qw(A B lost D);
my @reused = grep { $old_epochs{$_} } map { epoch_of($_) } map { values %{ $all{$_} } } qw(C C2);
is(scalar(@reused), 0, 'the promoted standby never ran an epoch the old primary ran');
my %epochs = map { ($_ => { map { (epoch_of($_) => 1) } values %{ $all{$_} } }) } keys %all;
isnt(join(',', sort keys %{ $epochs{B} }), join(',', sort keys %{ $epochs{A} }), 'a restart starts a new epoch');
isnt(join(',', sort keys %{ $epochs{C2} }), join(',', sort keys %{ $epochs{C} }), 'a crash restart starts a new epoch');

check_truth($standby, 'promoted standby, rows of A', $all{A}, 1);
check_truth($standby, 'promoted standby, rows of B', $all{B}, 1);
check_truth($standby, 'promoted standby, rows lost in the failover', $all{lost}, 0);
check_truth($standby, 'promoted standby, its own rows', { %{ $all{C} }, %{ $all{C2} } }, 1);
check_truth($standby, 'promoted standby, the old primary\'s later rows', $all{D}, 0);
check_truth($primary, 'old primary, its own rows', { %{ $all{A} }, %{ $all{B} }, %{ $all{D} } }, 1);
check_truth($primary, 'old primary, the rows lost in its crash', $all{lost}, 0);
check_truth($primary, 'old primary, the promoted standby\'s rows', { %{ $all{C} }, %{ $all{C2} } }, 0);

for my $node ($primary, $standby)
{
	unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC|TRAP:/, $node->name . ': no process crashed');
	$node->stop;
}
done_testing();
