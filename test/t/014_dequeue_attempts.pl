# Copyright: aq project.  PostgreSQL 15 TAP test (PostgreSQL::Test::Cluster).
#
# hardening D17: a dequeue whose transaction ends without committing is an attempt, counted
# exactly once, however the session ends: the client disconnecting, pg_terminate_backend,
# idle_in_transaction_session_timeout, kill -9 of the backend, a postmaster crash (every
# process killed at once) and an immediate shutdown.  In each case the message's
# retry_count becomes 1 (visible to every session), the retry_delay holds it back, and a
# message that kills its backend at every delivery reaches the exception queue after
# exactly max_retries + 1 deliveries.  (aq 0.4.0 counted an attempt only at the session's
# next aq call: every case here showed retry_count = 0, and the poison message was
# delivered for ever.)
use strict;
use warnings;

use FindBin;
use IPC::Run;
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib $FindBin::Bin;
use AqCrash qw(kill9_backend kill_server);

my $node = PostgreSQL::Test::Cluster->new('dequeue_attempts');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
restart_after_crash = on
log_min_messages = warning
));
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('att_qt', 'text');
SELECT aq.create_queue('att_q', 'att_qt', max_retries => 5, retry_delay => '0');
SELECT aq.start_queue('att_q');
SELECT aq.create_queue('delay_q', 'att_qt', max_retries => 5, retry_delay => '1 hour');
SELECT aq.start_queue('delay_q');
SELECT aq.create_queue_table('poison_qt', 'text');
SELECT aq.create_queue('poison_q', 'poison_qt', max_retries => 3, retry_delay => '0');
SELECT aq.start_queue('poison_q');
});


# A consumer that dequeues one message of $queue and then sits idle in its transaction
# (psql waits for more input).  Returns (handle, backend pid, the payload).
sub hold_message
{
	my ($queue, @before) = @_;
	return hold_dequeue("aq.dequeue('$queue', NULL::text, aq.dequeue_options(wait => '20 s'))", @before);
}

# The same with the dequeue call given.
sub hold_dequeue
{
	my ($dequeue, @before) = @_;
	my ($out, $err) = ('', '');
	my $in = join("\n", @before, 'SELECT pg_backend_pid();', 'BEGIN;', "SELECT 'got:' || payload FROM $dequeue;", '');
	my $h = IPC::Run::start([ 'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
	$h->pump until $out =~ /^got:(.*)$/m || $err =~ /ERROR|FATAL/;
	my ($payload) = $out =~ /^got:(.*)$/m;
	my ($pid) = $out =~ /^(\d+)$/m;
	die "no message: $err" unless defined $payload;
	return ($h, $pid, $payload);
}

sub attempts_of
{
	my ($payload) = @_;
	return $node->safe_psql('postgres', "SELECT retry_count FROM att_qt WHERE user_data = '$payload'");
}

# After the session ended: the attempt shows up (without anybody dequeuing again), once.
sub check_counted
{
	my ($payload, $case) = @_;
	ok($node->poll_query_until('postgres',
		"SELECT retry_count = 1 FROM att_qt WHERE user_data = '$payload'"),
		"$case: the attempt is counted");
	is(attempts_of($payload), '1', "$case: exactly once");
}

# Every process of the server killed at once (test/t/AqCrash.pm), then started again: a
# postmaster crash.
sub crash_server
{
	my $left = kill_server($node);
	die "the crashed server's processes did not go: $left" if $left;
	$node->start;
}

# ---------------------------------------------------------------- the session's ends
my @cases = (
	[ 'client disconnect', [], sub { my ($h) = @_; $h->finish; } ],
	[ 'pg_terminate_backend', [], sub {
		my ($h, $pid) = @_;
		$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
		$h->finish; } ],
	[ 'idle_in_transaction_session_timeout', [ "SET idle_in_transaction_session_timeout = '300ms';" ], sub {
		my ($h, $pid) = @_;
		$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid");
		$h->finish; } ],
	[ 'kill -9 of the backend', [], sub {
		my ($h, $pid) = @_;
		kill9_backend($node, $pid);
		$h->kill_kill; } ],
	[ 'postmaster crash', [], sub { my ($h) = @_; crash_server(); $h->kill_kill; } ],
	[ 'immediate shutdown', [], sub { my ($h) = @_; $node->stop('immediate'); $h->kill_kill; $node->start; } ],
);
for my $case (@cases)
{
	my ($name, $before, $end) = @$case;
	$node->safe_psql('postgres', "SELECT aq.enqueue('att_q', '$name'::text)");
	my ($h, $pid, $payload) = hold_message('att_q', @$before);
	is($payload, $name, "$name: the consumer holds the message");
	$end->($h, $pid);
	check_counted($name, $name);
	# The message is back and is delivered again (attempts = 1); commit that delivery.
	is($node->safe_psql('postgres',
		"SELECT (message_properties).attempts FROM aq.dequeue('att_q', NULL::text, aq.dequeue_options(wait => '10 s'))"),
		'1', "$name: delivered again, with attempts = 1");
}

# ---------------------------------------------------------------- retry_delay holds after a crash
$node->safe_psql('postgres', "SELECT aq.enqueue('delay_q', 'delayed'::text)");
{
	my ($h, $pid) = hold_message('delay_q');
	kill9_backend($node, $pid);
	$h->kill_kill;
	ok($node->poll_query_until('postgres', "SELECT retry_count = 1 FROM att_qt WHERE user_data = 'delayed'"),
		'kill -9 with retry_delay: the attempt is counted');
	is($node->safe_psql('postgres', "SELECT delay > now() + interval '50 minutes' FROM att_qt WHERE user_data = 'delayed'"),
		't', 'kill -9 with retry_delay: the message is held back by its retry_delay');
	my ($stdout, $stderr);
	$node->psql('postgres', "SELECT payload FROM aq.dequeue('delay_q', NULL::text, aq.dequeue_options(wait => '0'))",
		stdout => \$stdout, stderr => \$stderr);
	like($stderr, qr/no message available/, 'kill -9 with retry_delay: nobody gets it meanwhile');
}

# ---------------------------------------------------------------- the poison message
# It kills its consumer's backend at every delivery: after max_retries (3) + 1 deliveries it
# is in the exception queue and is not delivered again.
$node->safe_psql('postgres', "SELECT aq.enqueue('poison_q', 'poison'::text)");
my $deliveries = 0;
for my $round (1 .. 8)
{
	my $left = $node->safe_psql('postgres',
		"SELECT count(*) FROM poison_qt m JOIN aq.queues q ON q.queue_id = m.q_id WHERE q.queue_name = 'poison_q'");
	last if $left eq '0';
	# The previous crash's attempt must be counted before the next delivery can see it.
	my ($out, $err) = ('', '');
	my $in = "SELECT pg_backend_pid();\nBEGIN;\n"
	  . "SELECT 'got:' || payload FROM aq.dequeue('poison_q', NULL::text, aq.dequeue_options(wait => '5 s'));\n";
	my $h = IPC::Run::start([ 'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	$h->pump until $out =~ /^got:/m || $err =~ /ERROR|FATAL/;
	my ($pid) = $out =~ /^(\d+)$/m;
	if ($out =~ /^got:/m)
	{
		$deliveries++;
		kill9_backend($node, $pid);
	}
	$h->kill_kill;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM poison_qt WHERE xmax <> '0' AND NOT aq._claimable(tableoid, ctid)");
}
is($deliveries, 4, 'the poison message was delivered exactly max_retries + 1 = 4 times');
is($node->safe_psql('postgres',
	"SELECT q.queue_name || ' ' || m.retry_count FROM poison_qt m JOIN aq.queues q ON q.queue_id = m.q_id"),
	'aq$_poison_qt_e 4', 'it is in the exception queue with retry_count 4');

# ---------------------------------------------------------------- a queue table that stores each message once
# A consumer's attempt is the receipt its dequeue wrote, handed to the settler when the
# transaction aborts (src/queue/once_walk.hpp, 5): the same ends of a session count it, for that
# consumer only.  A crash (kill -9) counts none, as Oracle, but loses nothing: the message is the
# consumer's again.
$node->safe_psql('postgres', q{
SELECT aq.create_queue_table('once_qt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('once_q', 'once_qt', retry_delay => '0');
SELECT aq.start_queue('once_q');
SELECT aq.add_subscriber('once_q', aq.agent(s)) FROM unnest(ARRAY['A', 'B']) s;
});
sub hold_once_message
{
	return hold_dequeue("aq.dequeue('once_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => '20 s'))", @_);
}
sub once_attempts_of_sql
{
	my ($payload) = @_;
	return qq{
		SELECT count(*) FROM once_qt m,
		  (SELECT * FROM "once_qt\$0_r" UNION ALL SELECT * FROM "once_qt\$1_r") r,
		  generate_series(1, cardinality(r.runs) / 2) i
		 WHERE r.kind = 'r' AND r.consumer = 'A' AND m.user_data = '$payload'
		   AND m.msgid BETWEEN r.runs[2 * i - 1] AND r.runs[2 * i]};
}
sub once_attempts_of
{
	my ($payload) = @_;
	return $node->safe_psql('postgres', once_attempts_of_sql($payload));
}
for my $case (@cases[0 .. 3])
{
	my ($name, $before, $end) = @$case;
	$node->safe_psql('postgres', "SELECT aq.enqueue('once_q', 'once $name'::text)");
	my ($h, $pid, $payload) = hold_once_message(@$before);
	is($payload, "once $name", "stored once, $name: A holds the message");
	$end->($h, $pid);
	my $expected = $name =~ /kill -9/ ? '0' : '1';
	if ($expected eq '1')
	{
		ok($node->poll_query_until('postgres', qq{SELECT (} . once_attempts_of_sql($payload) . qq{) = 1}),
			"stored once, $name: the attempt is counted");
	}
	else
	{
		# After the crash restart: nothing counted, nothing lost.
		$node->poll_query_until('postgres', 'SELECT true');
	}
	is(once_attempts_of($payload), $expected, "stored once, $name: " . ($expected ? 'exactly once' : 'not counted'));
	is($node->safe_psql('postgres',
		"SELECT payload || ' ' || (message_properties).attempts FROM aq.dequeue('once_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => '10 s'))"),
		"once $name $expected", "stored once, $name: A gets it again, with attempts = $expected");
}
is($node->safe_psql('postgres',
	"SELECT string_agg(payload || ' ' || (message_properties).attempts, ',') FROM aq.dequeue_array('once_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'B', wait => 0))"),
	'once client disconnect 0,once pg_terminate_backend 0,once idle_in_transaction_session_timeout 0,once kill -9 of the backend 0',
	'stored once: B gets every message, with no attempt');

$node->stop;
my $log = slurp_file($node->logfile);
my $kills = () = $log =~ /terminated by signal 9/g;
cmp_ok($kills, '>=', 1, 'the server log shows the intentional kill -9s');
unlike($log, qr/PANIC|TRAP:|terminated by signal (?!9)/, 'and no other crash');
done_testing();
