# hardening 14: browse is read-only, so it works on a hot standby, on a normal queue and on an
# exception queue (aq 0.4.0 ran a hidden expiry UPDATE in every browse of an exception queue and
# in the first browse of a normal queue in a backend: 25006 on a standby, every time).  The
# standby sees what the primary moved; the expiry move itself waits for a consuming dequeue on
# the primary.  A removing dequeue on the standby still fails with 25006 (it deletes).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'aq'\n");
$primary->start;
$primary->safe_psql('postgres', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('sb_qt', 'text');
SELECT aq.create_queue('sb_q', 'sb_qt');
SELECT aq.start_queue('sb_q');
SELECT aq.start_queue('aq$_sb_qt_e', enqueue => false);
SELECT aq.enqueue_array('sb_q', ARRAY['ready 1', 'ready 2', 'expired, moved', 'expired, not moved']);
UPDATE sb_qt SET expiration = now() - interval '1 s' WHERE user_data = 'expired, moved';
});
# A consuming dequeue of the exception queue moves the expired message (and commits the move).
is($primary->safe_psql('postgres', q{
SELECT payload FROM aq.dequeue('aq$_sb_qt_e', NULL::text, aq.dequeue_options(wait => '0', dequeue_mode => 'locked'));
}), 'expired, moved', 'the primary moved the expired message to the exception queue');
$primary->safe_psql('postgres', q{
UPDATE sb_qt SET expiration = now() - interval '1 s' WHERE user_data = 'expired, not moved';
});
$primary->backup('backup');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'backup', has_streaming => 1);
$standby->append_conf('postgresql.conf', "shared_preload_libraries = 'aq'\n");
$standby->start;
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');

my $browse = q{aq.dequeue_options(wait => '0', dequeue_mode => 'browse', navigation => 'first_message')};
is($standby->safe_psql('postgres',
		"SELECT string_agg(payload, ', ' ORDER BY msgid) FROM aq.dequeue_array('sb_q', NULL::text, 10, $browse)"),
	'ready 1, ready 2', 'standby: browse of the normal queue returns its deliverable messages');
is($standby->safe_psql('postgres',
		"SELECT payload FROM aq.dequeue('aq\$_sb_qt_e', NULL::text, $browse)"),
	'expired, moved', 'standby: browse of the exception queue returns the message the primary moved');
# Again in the same session (the once-a-second sweep of a normal queue is due at once there).
is($standby->safe_psql('postgres', qq{
SELECT payload FROM aq.dequeue('aq\$_sb_qt_e', NULL::text, $browse);
SELECT payload FROM aq.dequeue('sb_q', NULL::text, $browse);
}), "expired, moved\nready 1", 'standby: browse of both queues in one session');

my ($rc, $out, $err) = $standby->psql('postgres',
	"SELECT payload FROM aq.dequeue('sb_q', NULL::text, aq.dequeue_options(wait => '0'))");
like($err, qr/read-only transaction/, 'standby: a removing dequeue fails (25006)');

# The standby never wrote: the primary still has the not-moved message in its normal queue.
is($primary->safe_psql('postgres', q{
SELECT q.queue_name FROM sb_qt m JOIN aq.queues q ON q.queue_id = m.q_id WHERE m.user_data = 'expired, not moved'
}), 'sb_q', 'the message expired after the move is still in its normal queue');

my $log = slurp_file($standby->logfile);
unlike($log, qr/terminated by signal|PANIC|TRAP/, 'the standby log has no crash');
$standby->stop;
$primary->stop;
done_testing();
