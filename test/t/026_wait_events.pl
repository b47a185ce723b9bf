
# Copyright: aq project.  PostgreSQL TAP test (PostgreSQL::Test::Cluster), for 15, 17 and 18.
#
# aq's waits in pg_stat_activity: wait_event_type 'Extension' on every version, and from
# PostgreSQL 17 on each with its own name (compat/wait_event.hpp):
#   - a waiting dequeue is 'AqDequeue';
#   - the settler launcher, the fast-ingest launcher and the log writer, idle, are
#     'AqSettlerLauncherMain', 'AqIngestLauncherMain' and 'AqLogWriterMain';
#   - on 17 and 18 the names are listed in pg_wait_events.
# On 15 the same waits are plain 'Extension'.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('wait_events');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'aq'\n");
$node->start;
my $version = $node->safe_psql('postgres', 'SHOW server_version_num');
my $named = $version >= 170000;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('we_qt', 'text');
SELECT aq.create_queue('we_q', 'we_qt');
SELECT aq.start_queue('we_q');
});

# A dequeue that waits until the test enqueues.
my $waiter = $node->background_psql('postgres');
$waiter->query_until(qr/started/, q{
\echo started
SELECT * FROM aq.dequeue('we_q', NULL::text, aq.dequeue_options(wait => '60 s'));
});

my $dequeue_event = $named ? 'AqDequeue' : 'Extension';
ok( $node->poll_query_until(
		'postgres', qq{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE query LIKE 'SELECT * FROM aq.dequeue(%' AND wait_event_type = 'Extension' AND wait_event = '$dequeue_event'}
	),
	"a waiting dequeue shows wait_event '$dequeue_event'");

# The background workers, idle.
for my $worker (['aq settler launcher', 'AqSettlerLauncherMain'],
	['aq fast ingest launcher', 'AqIngestLauncherMain'])
{
	my ($type, $event) = @$worker;
	$event = 'Extension' unless $named;
	ok( $node->poll_query_until(
			'postgres', qq{
SELECT count(*) >= 1 FROM pg_stat_activity
 WHERE backend_type = '$type' AND wait_event_type = 'Extension' AND wait_event = '$event'}
		),
		"$type waits as '$event'");
}

if ($named)
{
	is( $node->safe_psql(
			'postgres', q{
SELECT string_agg(name, ',' ORDER BY name) FROM pg_wait_events
 WHERE type = 'Extension' AND name IN ('AqDequeue', 'AqSettlerLauncherMain', 'AqIngestLauncherMain')}),
		'AqDequeue,AqIngestLauncherMain,AqSettlerLauncherMain',
		'pg_wait_events lists them');
}

$node->safe_psql('postgres', q{SELECT aq.enqueue('we_q', 'wake'::text)});
$waiter->quit;
$node->stop;
done_testing();
