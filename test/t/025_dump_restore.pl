# Copyright: aq project.  PostgreSQL TAP test (PostgreSQL::Test::Cluster).
#
# A database with fast-ingest tables, dumped with pg_dump and restored into another cluster,
# keeps fast ingest working (hardening E19: what users built survives the move):
#
#   - aq.fast_ingest_tables named its tables by OID: the restore kept the old numbers, which
#     name other relations of the new cluster (an index, say) or none, so the table was no
#     longer enabled (a hinted insert failed with 55000) and another one could be.  Since 0.5.0
#     the registry and the rejects name tables by regclass (dumped as names), and the registry
#     rows of dropped tables are not dumped;
#   - the new cluster's fast-ingest epochs started afresh and repeated the source's, which the
#     restored aq.fast_ingest_progress already holds: the new ids repeated old ones, and the
#     watermark of the old epoch answered for the new rows.  A restored progress row now
#     raises the new cluster's epoch counter above its epoch.
#
# tools/dump-restore-check does the same from PostgreSQL 15 to 17 and 18, with everything else.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my @nodes;
for my $name ('source', 'target')
{
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
aq.fast_ingest_buffer = 8MB
log_min_messages = warning
));
	$node->start;
	push @nodes, $node;
}
my ($source, $target) = @nodes;

$source->safe_psql('postgres', q{
	CREATE DATABASE moved;
});
# Tables created before the fast-ingest one take the OIDs the restore gives it elsewhere.
$source->safe_psql('moved', q{
	CREATE EXTENSION aq;
	CREATE TABLE gone (id bigint PRIMARY KEY);
	SELECT aq.enable_fast_ingest('gone');
	DROP TABLE gone;
	CREATE TABLE readings (id bigint PRIMARY KEY, v text CHECK (v <> 'bad'));
	SELECT aq.enable_fast_ingest('readings');
	INSERT /*+ MEMOPTIMIZE_WRITE */ INTO readings SELECT i, 'r' || i FROM generate_series(1, 10) i;
	INSERT /*+ MEMOPTIMIZE_WRITE */ INTO readings VALUES (11, 'bad');
	SELECT aq.write_end('60 s');
});
is($source->safe_psql('moved', 'SELECT count(*) FROM aq.fast_ingest_tables'), '2',
	'source: the registry holds the dropped table and readings');
my $old_epoch = $source->safe_psql('moved', 'SELECT max(epoch) FROM aq.fast_ingest_progress');
like($old_epoch, qr/^\d+$/, "source: progress recorded for epoch $old_epoch");

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/moved.dump';
my ($out, $err) = ('', '');
IPC::Run::run([ 'pg_dump', '-Fc', '--create', '-f', $dump, '-d', $source->connstr('moved') ], '>', \$out, '2>', \$err)
  or die "pg_dump failed: $err";
IPC::Run::run([ 'pg_restore', '--create', '--exit-on-error', '-d', $target->connstr('postgres'), $dump ],
	'>', \$out, '2>', \$err)
  or die "pg_restore failed: $err";
is($err, '', 'pg_restore printed nothing');

is($target->safe_psql('moved', 'SELECT string_agg(relid::text, \',\') FROM aq.fast_ingest_tables'),
	'readings', 'target: the registry names readings, and only readings');
is($target->safe_psql('moved', 'SELECT string_agg(DISTINCT relid::text, \',\') FROM aq.fast_ingest_rejects'),
	'readings', 'target: the restored reject names readings');

$target->safe_psql('moved', q{
	INSERT /*+ MEMOPTIMIZE_WRITE */ INTO readings SELECT i, 'after ' || i FROM generate_series(101, 110) i;
	SELECT aq.write_end('60 s');
});
is($target->safe_psql('moved', 'SELECT count(*) FROM readings WHERE id > 100'), '10', 'target: a hinted insert into the restored table is applied');

my $new_epoch = $target->safe_psql('moved', 'SELECT epoch FROM aq.memoptimize_write_area');
cmp_ok($new_epoch, '>', $old_epoch, "target: its epoch $new_epoch is above the restored epoch $old_epoch");
is($target->safe_psql('moved', qq{
	SELECT applied_rows FROM aq.fast_ingest_progress WHERE epoch = $old_epoch}), '10',
	'target: the restored epoch\'s progress is the source\'s, untouched');
is($target->safe_psql('moved', qq{
	SELECT applied_rows FROM aq.fast_ingest_progress WHERE epoch = $new_epoch}), '10',
	'target: the new rows are counted under the new epoch');

for my $node (@nodes)
{
	my $log = slurp_file($node->logfile);
	unlike($log, qr/terminated by signal|PANIC|TRAP:/, $node->name . ': no crash in the server log');
}

done_testing();
