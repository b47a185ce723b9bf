# hardening 16: a dequeue that waits (forever, Oracle's default) and whose client goes away
# ends by itself within seconds, without client_connection_check_interval: it no longer holds
# its snapshot (and the xmin horizon of the whole cluster) until its wait runs out.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('waiting_client_gone');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'aq'\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('gone_qt', 'text');
SELECT aq.create_queue('gone_q', 'gone_qt');
SELECT aq.start_queue('gone_q');
});
is($node->safe_psql('postgres', 'SHOW client_connection_check_interval'), '0',
	'client_connection_check_interval is off (the default)');

# For each way of waiting: forever, and a long interval.
for my $wait ('NULL', q{'1 hour'}) {
	my ($out, $err) = ('', '');
	my $client = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres'), '-c',
		  "SELECT payload FROM aq.dequeue('gone_q', NULL::text, aq.dequeue_options(wait => $wait))" ],
		'>', \$out, '2>', \$err);
	ok($node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE wait_event_type = 'Extension' AND query LIKE '%aq.dequeue(''gone_q''%'}),
		"wait => $wait: the dequeue is asleep");
	my $backend = $node->safe_psql('postgres', q{
		SELECT pid FROM pg_stat_activity WHERE query LIKE '%aq.dequeue(''gone_q''%' AND pid <> pg_backend_pid()});
	# The client dies without closing its session (no terminate message is sent).
	$client->kill_kill;
	ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $backend"),
		"wait => $wait: the waiting backend ended once its client was gone");
}
$node->stop;
my $log = slurp_file($node->logfile);
like($log, qr/connection to client lost/, 'the server log says why');
unlike($log, qr/terminated by signal|PANIC|TRAP:/, 'server log shows no crash');
done_testing();
