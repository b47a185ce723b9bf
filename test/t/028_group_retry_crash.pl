# Copyright: aq project.  PostgreSQL 15 TAP test (PostgreSQL::Test::Cluster).
#
# Group split after a kill -9 with retry_delay > 0 (groups.hpp, retries.hpp): a group is
# delivered whole, in order, to one consumer, or not at all.  A consumer holds the head of a
# group (a1 of a1 a2 a3) uncommitted and its backend is killed with kill -9; after the crash
# restart the settler counts the attempt and the queue's retry_delay holds a1 back.  The next
# consumer must get a1 a2 a3 from the head, end_of_group on a3 only, once the delay has passed
# (its dequeue waits for it: wait => 30 s, an event-driven wait, no sleep).  Wrong: it takes
# a2 a3 at once, end_of_group on a3, and a1 later alone.
# retry_delay is 3 s so that the wrong result cannot pass by the delay running out between the
# settling (polled every 0.1 s) and the next dequeue.
use strict;
use warnings;

use FindBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib $FindBin::Bin;
use AqCrash qw(kill9_backend);

my $node = PostgreSQL::Test::Cluster->new('group_retry_crash');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
restart_after_crash = on
log_min_messages = warning
));
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('gk_qt', 'text', message_grouping => 'transactional');
SELECT aq.create_queue('gk_q', 'gk_qt', max_retries => 5, retry_delay => '3 s');
SELECT aq.start_queue('gk_q');
-- The payloads of one dequeue_array, '*' after the end of a group, '-' for none (QA228).
CREATE FUNCTION gk_take(n integer, wait aq.wait_time) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT string_agg(payload || CASE WHEN (message_properties).end_of_group THEN '*' ELSE '' END, ' ' ORDER BY k)
              FROM aq.dequeue_array('gk_q', NULL::text, n, aq.dequeue_options(wait => wait))
                   WITH ORDINALITY AS d(msgid, payload, message_properties, k));
EXCEPTION WHEN SQLSTATE 'QA228' THEN
    RETURN '-';
END $$;
});

# A session that dequeues the first $n messages in a transaction and sits idle in it.
sub hold
{
	my ($n) = @_;
	my ($out, $err) = ('', '');
	my $in = join("\n", "SELECT 'pid:' || pg_backend_pid();", 'BEGIN;', "SELECT 'got:' || gk_take($n, 0);", '');
	my $h = IPC::Run::start([ 'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
	$h->pump until $out =~ /^got:.*$/m || $err =~ /ERROR|FATAL/;
	my ($got) = $out =~ /^got:(.*)$/m;
	my ($pid) = $out =~ /^pid:(\d+)$/m;
	die "the session took nothing: $err" unless defined $got && defined $pid;
	return ($h, $pid, $got);
}

for my $case ([ 1, 'a1', 1 ], [ 2, 'a1 a2', 2 ])
{
	my ($n, $held, $attempts) = @$case;
	my $name = "kill -9 holding $held";
	is($node->safe_psql('postgres', "SELECT cardinality(aq.enqueue_array('gk_q', ARRAY['a1', 'a2', 'a3']))"), '3',
		"$name: one group of three");
	my ($h, $pid, $got) = hold($n);
	is($got, $held, "$name: the consumer holds the head of the group");
	kill9_backend($node, $pid);
	$h->kill_kill;
	ok($node->poll_query_until('postgres', "SELECT count(*) = $attempts FROM ONLY gk_qt WHERE retry_count = 1"),
		"$name: the attempt is counted");
	is($node->safe_psql('postgres', 'SELECT gk_take(10, 30)'), 'a1 a2 a3*',
		"$name: the next consumer gets the whole group, from its head, once the delay has passed");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM ONLY gk_qt'), '0', "$name: nothing is left");
	$node->safe_psql('postgres', 'DELETE FROM ONLY gk_qt');
}

$node->stop;
my $log = slurp_file($node->logfile);
unlike($log, qr/PANIC|TRAP:|terminated by signal (?!9)|exited with exit code (?![01]\b)\d+/, 'no other crash');
unlike($log, qr/\bXX000\b/, 'no internal error (XX000) in the server log');
done_testing();
