# Waits on a hot standby (waiting.hpp, invariants 5 and 6).
#  1. A browse that waits on the standby gets the message the primary enqueues during its wait,
#     soon after replay applies it.  Before, no wake-up ever came on a standby (nothing commits
#     there): the browse sat out its whole wait and ended with QA228.
#  2. While it sleeps, it holds no xmin on the standby, so with hot_standby_feedback it does not
#     hold the primary's horizon back either: the walsender's xmin passes transactions that began
#     after the browse slept.  Before, the sleeping browse's snapshot was fed back to the primary
#     for the whole wait.
use strict;
use warnings;

use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib $FindBin::Bin;
use AqSession qw(query finish);

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'aq'\n");
$primary->start;
$primary->safe_psql('postgres', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('sw_qt', 'text');
SELECT aq.create_queue('sw_q', 'sw_qt');
SELECT aq.start_queue('sw_q');
});
$primary->backup('backup');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'backup', has_streaming => 1);
$standby->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'aq'
hot_standby_feedback = on
wal_receiver_status_interval = 1s
});
$standby->start;
$primary->wait_for_catchup($standby);

my $browser = AqSession::session($standby, 'postgres');
query($browser, q{SET application_name = 'sw_browser';});
$browser->{in} .= q{SELECT payload, clock_timestamp() - statement_timestamp() < interval '20 s' AS in_time
  FROM aq.dequeue('sw_q', NULL::text, aq.dequeue_options(dequeue_mode => 'browse', wait => '60'));} . "\n";
$browser->{h}->pump_nb while length $browser->{in};
$standby->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE application_name = 'sw_browser' AND state = 'active' AND wait_event_type = 'Extension'})
  or die 'the browse on the standby did not sleep';

# 2. Asleep: no xmin on the standby, none fed back to the primary.
is($standby->safe_psql('postgres',
	q{SELECT coalesce(backend_xmin::text, 'none') FROM pg_stat_activity WHERE application_name = 'sw_browser'}),
	'none', 'the sleeping browse holds no xmin on the standby');
# The standby feeds back the xmin of its oldest snapshot (or, with none, the oldest transaction
# still running on the primary): once a transaction that starts after the browse slept has
# ended, the walsender's xmin must pass it.  The sleeping browse's snapshot would hold it below.
my $later = $primary->safe_psql('postgres', q{SELECT txid_current();});
ok($primary->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_replication WHERE backend_xmin::text::bigint > $later"),
	"the standby's feedback no longer holds the primary's horizon at the sleeping browse's snapshot");

# 1. The primary enqueues; the browse returns it well within its wait.
$primary->safe_psql('postgres', q{SELECT aq.enqueue('sw_q', 'replayed'::text);});
my ($out, $err) = query($browser, 'SELECT 1;');
is($out, "replayed|t\n1", 'the waiting browse on the standby got the replayed message in time');
is($err, '', 'without an error');
finish($browser);

$standby->stop;
$primary->stop;
done_testing();
