# Copyright: aq project.  PostgreSQL TAP test (PostgreSQL::Test::Cluster), for 15, 17 and 18.
#
# Immediate dequeues under faults (src/queue/immediate.hpp, protocol 6-9).  The worker is held
# inside a dequeue by its deq_condition, a function that waits for an advisory lock the test
# holds; then:
#   1. pg_terminate_backend of the worker: the caller gets 57P01 and the message stays.
#   2. A cancel of the caller: the dequeue is given up (the worker, signalled, cancels it at
#      once and rolls it back): 57014, the message stays; the session goes on.  (Once the worker commits, a cancel is too late and
#      the messages are returned.)
#   3. pg_terminate_backend of the caller: given up as well, the message stays; the slot is freed
#      (the next immediate dequeues work).
#   4. kill -9 of the worker: the crash restart ends the caller too; the message stays.
#   5. kill -9 of the caller: the same, and immediate dequeues work again after the restart.
#   6. The caller waits, not the worker: while an immediate dequeue waits for a message, another
#      session's immediate enqueues and dequeues go through the same worker; the waiter takes
#      the message enqueued later.
#   7. No background-worker slot for the worker: 53400 at once, the message stays.
#   8. Two callers' immediate enqueues in one round of the worker: a transaction group each.
#   9. Two callers' enqueues into a queue without groups in one round: one shared call, each
#      caller its own ids; a failing shared call falls back to one call per request.
#  10. A request the busy worker has not taken within aq.immediate_timeout: 53000, never run.
# No fixed sleeps: poll_query_until and the events themselves.
use strict;
use warnings;

use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib $FindBin::Bin;
use AqCrash qw(kill9_backend);
use AqSession qw(query finish);

my $node = PostgreSQL::Test::Cluster->new('immediate_dequeue');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
restart_after_crash = on
log_min_messages = warning
track_commit_timestamp = on
));
$node->start;
sub session { AqSession::session($node, @_) }

$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('td_qt', 'text');
SELECT aq.create_queue('td_q', 'td_qt');
SELECT aq.start_queue('td_q');
SELECT aq.create_queue_table('td_other_qt', 'text');
SELECT aq.create_queue('td_other_q', 'td_other_qt');
SELECT aq.start_queue('td_other_q');
CREATE FUNCTION td_hold(t text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF t LIKE 'held%' THEN PERFORM pg_advisory_xact_lock(4343); END IF;
  RETURN true;
END $$;
});

my $dequeue = q{SELECT payload FROM aq.dequeue('td_q', NULL::text, aq.dequeue_options(deq_condition => 'td_hold(tab.user_data)', visibility => 'immediate', wait => '0')) AS d(m, payload, p)};

sub rows_of
{
	my ($payload) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM td_qt WHERE user_data = '$payload'");
}

# The test holds the advisory lock; $caller starts an immediate dequeue of the message
# $payload, which the worker's condition blocks on.  Returns the caller's session and pid and the
# worker's pid.
sub start_held
{
	my ($holder, $payload) = @_;
	$node->safe_psql('postgres', "SELECT aq.enqueue('td_q', '$payload'::text)");
	query($holder, 'SELECT pg_advisory_lock(4343);');
	my $caller = session('postgres');
	my $caller_pid = query($caller, 'SELECT pg_backend_pid();');
	query($caller, "SET aq.immediate_timeout = '60s';");
	$caller->{in} .= "$dequeue;\n";
	$caller->{h}->pump_nb while length $caller->{in};
	$node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE backend_type = 'aq immediate' AND wait_event_type = 'Lock' AND wait_event = 'advisory'})
	  or die 'the worker did not block in the condition';
	my $worker = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'aq immediate'});
	return ($caller, $caller_pid, $worker);
}

# Waits until $caller's pending statement has finished; returns its output and errors.
sub finish_pending
{
	my ($caller) = @_;
	my ($out, $err) = query($caller, 'SELECT 1;');
	return ($out, $err);
}

my $holder = session('postgres');

# 1. The worker terminated while it runs the dequeue.
{
	my ($caller, $caller_pid, $worker) = start_held($holder, 'held 1');
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($worker)");
	my ($out, $err) = finish_pending($caller);
	like($err, qr/57P01: the immediate dequeue from queue "td_q" did not commit/,
		'1: the caller learns that the terminated worker did not commit');
	query($holder, 'SELECT pg_advisory_unlock(4343);');
	is(rows_of('held 1'), '1', '1: the message stays');
	$node->safe_psql('postgres', q{DELETE FROM td_qt});
	finish($caller);
}

# 2. A cancel of the caller while the worker runs its dequeue: the dequeue is given up, and the
#    worker, signalled, cancels it at once, though the lock its condition waits for is still held
#    (before, the caller waited until the worker's lock wait ran out: aq.immediate_timeout, 60 s
#    here): 57014, and the message stays.
{
	my ($caller, $caller_pid, $worker) = start_held($holder, 'held 2');
	my $t0 = time;
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($caller_pid)");
	my ($out, $err) = finish_pending($caller);
	my $took = time - $t0;
	like($err, qr/57014: canceling statement due to user request.*\n.*DETAIL:  The immediate dequeue did not commit/,
		'2: the caller gets 57014: the dequeue did not commit');
	ok($took < 30, "2: the cancelled call returned while the lock was still held (in ${took} s, not after the worker's 60 s lock wait)");
	is($node->safe_psql('postgres', "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4343 AND granted"), '1',
		'2: the lock was still held');
	query($holder, 'SELECT pg_advisory_unlock(4343);');
	is(rows_of('held 2'), '1', '2: the message stays');
	is(query($caller, 'SELECT 42;'), '42', '2: the session goes on');
	$node->safe_psql('postgres', q{DELETE FROM td_qt});
	finish($caller);
}

# 3. The caller terminated while the worker runs its dequeue: given up as well, the message
#    stays; the slot is freed (the next immediate dequeues work).
{
	my ($caller, $caller_pid, $worker) = start_held($holder, 'held 3');
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($caller_pid)");
	$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $caller_pid")
	  or die 'the caller did not end';
	query($holder, 'SELECT pg_advisory_unlock(4343);');
	ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'aq immediate' AND state = 'active'}),
		'3: the worker is done with it');
	is(rows_of('held 3'), '1', '3: the dequeue of a terminated caller was rolled back: the message stays');
	$caller->{h}->kill_kill;
	$node->safe_psql('postgres', q{DELETE FROM td_qt});
	$node->safe_psql('postgres', q{SELECT aq.enqueue_array('td_q', ARRAY['n1', 'n2', 'n3'])});
	my $taken = 0;
	for (1 .. 3)
	{
		$taken += $node->safe_psql('postgres', "SELECT count(*) FROM ($dequeue) d");
	}
	is($taken, 3, '3: immediate dequeues go on');
}

# 4. kill -9 of the worker mid-dequeue.
{
	my ($caller, $caller_pid, $worker) = start_held($holder, 'held 4');
	kill9_backend($node, $worker);
	$caller->{h}->kill_kill;
	$holder->{h}->kill_kill;
	is(rows_of('held 4'), '1', '4: after kill -9 of the worker the message stays');
	$node->safe_psql('postgres', q{DELETE FROM td_qt});
	$holder = session('postgres');
}

# 5. kill -9 of the caller mid-dequeue.
{
	my ($caller, $caller_pid, $worker) = start_held($holder, 'held 5');
	kill9_backend($node, $caller_pid);
	$caller->{h}->kill_kill;
	$holder->{h}->kill_kill;
	is(rows_of('held 5'), '1', '5: after kill -9 of the caller the message stays');
	is($node->safe_psql('postgres', "SELECT count(*) FROM ($dequeue) d"), '1',
		'5: immediate dequeues work after the restart');
	$holder = session('postgres');
}

# 8. Two callers' immediate enqueues into a queue table with transaction groups, run by the
#    worker in one round (one transaction: both were queued while it was busy): each is a group
#    of its own, as two transactions' would be.  Before, they formed one group.
{
	$node->safe_psql('postgres', q{
		SELECT aq.create_queue_table('td_g_qt', 'text', message_grouping => 'transactional');
		SELECT aq.create_queue('td_g_q', 'td_g_qt');
		SELECT aq.start_queue('td_g_q');
	});
	my ($caller, $caller_pid, $worker) = start_held($holder, 'held 8');
	my @enqueuers;
	for my $payload ('b', 'c')
	{
		my $s = session('postgres');
		$s->{in} .= "SELECT aq.enqueue_array('td_g_q', ARRAY['${payload}1', '${payload}2'], enqueue_options => aq.enqueue_options(visibility => 'immediate'));\n";
		$s->{h}->pump_nb while length $s->{in};
		push @enqueuers, $s;
	}
	$node->poll_query_until('postgres', q{
		SELECT count(*) = 2 FROM pg_stat_activity
		 WHERE wait_event_type = 'Extension' AND query LIKE '%aq.enqueue_array(''td_g_q''%'})
	  or die 'the enqueues are not queued';
	query($holder, 'SELECT pg_advisory_unlock(4343);');
	finish_pending($_) for @enqueuers;
	finish_pending($caller);
	is($node->safe_psql('postgres', q{SELECT count(DISTINCT pg_xact_commit_timestamp(xmin)) FROM td_g_qt}), '1',
		'8: the two enqueues committed in one transaction of the worker (one commit time)');
	is($node->safe_psql('postgres', q{
		SELECT string_agg(g, ' ' ORDER BY g) FROM (
		  SELECT string_agg(user_data, ',' ORDER BY msgid) AS g FROM td_g_qt GROUP BY transaction_group) groups}),
		'b1,b2 c1,c2', '8: each caller\'s messages are a group of its own');
	finish($_) for @enqueuers, $caller;
}

# 9. Callers' enqueues of the same queue, role and kind in one round share one enqueue call
#    (protocol 5): each caller gets its own message ids; when the shared call fails, each
#    request runs on its own and gets its own outcome.  The queue table's trigger counts its
#    calls (a sequence: not rolled back) and refuses the payload 'bad'.
{
	$node->safe_psql('postgres', q{
		SELECT aq.create_queue_table('td_m_qt', 'text');
		SELECT aq.create_queue('td_m_q', 'td_m_qt');
		SELECT aq.start_queue('td_m_q');
		CREATE SEQUENCE td_m_calls;
		CREATE FUNCTION td_m_check() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
		  PERFORM nextval('public.td_m_calls');
		  IF NEW.user_data = 'bad' THEN RAISE EXCEPTION 'bad refused' USING ERRCODE = '23514'; END IF;
		  RETURN NEW;
		END $$;
		CREATE TRIGGER td_m_check BEFORE INSERT ON td_m_qt FOR EACH ROW EXECUTE FUNCTION td_m_check();
	});
	my $enqueue_m = q{SELECT aq.enqueue('td_m_q', '%s'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate'));};
	for my $round ([ 'good a', 'good b' ], [ 'good c', 'bad' ])
	{
		# The worker's lookup cache knows the queue (a queue table without groups: mergeable).
		$node->safe_psql('postgres', sprintf($enqueue_m, 'warm'));
		$node->safe_psql('postgres', q{DELETE FROM td_m_qt; SELECT setval('td_m_calls', 1, false)});
		my ($caller, $caller_pid, $worker) = start_held($holder, "held 9 $round->[1]");
		my @enqueuers;
		for my $payload (@$round)
		{
			my $s = session('postgres');
			$s->{in} .= sprintf($enqueue_m, $payload) . "\n";
			$s->{h}->pump_nb while length $s->{in};
			push @enqueuers, $s;
			# One after the other, so that both are queued before the worker is let go.
			my $queued = scalar @enqueuers;
			$node->poll_query_until('postgres', qq{
				SELECT count(*) = $queued FROM pg_stat_activity
				 WHERE wait_event_type = 'Extension' AND query LIKE '%aq.enqueue(''td_m_q''%'})
			  or die 'the enqueues are not queued';
		}
		query($holder, 'SELECT pg_advisory_unlock(4343);');
		my @outcomes = map { [ finish_pending($_) ] } @enqueuers;
		finish_pending($caller);
		my $ids = $node->safe_psql('postgres', q{SELECT string_agg(msgid || '=' || user_data, ' ' ORDER BY msgid) FROM td_m_qt});
		if ($round->[1] eq 'good b')
		{
			my ($a_id) = $outcomes[0][0] =~ /^(\d+)/;
			my ($b_id) = $outcomes[1][0] =~ /^(\d+)/;
			# In msgid order: which caller's message the shared call inserted first is not fixed.
			my $want = join(' ', map { "$_->[0]=$_->[1]" } sort { $a->[0] <=> $b->[0] } ([ $a_id, 'good a' ], [ $b_id, 'good b' ]));
			is($ids, $want, '9: one shared call: each caller got the ids of its own messages');
			is($node->safe_psql('postgres', q{SELECT last_value FROM td_m_calls}), '2', '9: the trigger ran once per message');
		}
		else
		{
			my ($c_id) = $outcomes[0][0] =~ /^(\d+)/;
			is($ids, "$c_id=good c", '9: the shared call failed: the good request still committed, on its own');
			like($outcomes[1][1], qr/23514: bad refused/, '9: the bad request got its own error');
			# In the shared call the trigger runs for 'good c' and then 'bad', or for 'bad' alone,
			# whichever the worker put first (not fixed); then once more for each: 4 or 3, never 2.
			like($node->safe_psql('postgres', q{SELECT last_value FROM td_m_calls}), qr/^[34]$/,
				'9: the shared call was tried first (the trigger ran in it, then once more for each)');
		}
		finish($_) for @enqueuers, $caller;
	}
}

# 10. The worker busy with another request: a request it has not taken within the caller's
#     aq.immediate_timeout is withdrawn with 53000, never run (a bounded wait, a clear error).
{
	my ($caller, $caller_pid, $worker) = start_held($holder, 'held 10');
	my $late = session('postgres');
	query($late, "SET aq.immediate_timeout = '200ms';");
	my ($out, $err) = query($late,
		q{SELECT aq.enqueue('td_other_q', 'late'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate'));});
	like($err, qr/53000: aq's immediate worker of this database did not take the immediate enqueue within aq.immediate_timeout \(200 ms\)/,
		'10: a request the busy worker did not take in time: 53000');
	query($holder, 'SELECT pg_advisory_unlock(4343);');
	finish_pending($caller);
	is($node->safe_psql('postgres', q{SELECT count(*) FROM td_other_qt WHERE user_data = 'late'}), '0',
		'10: the withdrawn request never ran');
	is(query($late, q{SELECT aq.enqueue('td_other_q', 'in time'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate')) > 0;}),
		't', '10: the next request of that session runs');
	$node->safe_psql('postgres', q{DELETE FROM td_other_qt; DELETE FROM td_qt});
	finish($_) for $late, $caller;
}
finish($holder);

# 6. The caller waits, not the worker.
{
	my $waiter = session('postgres');
	my $waiter_pid = query($waiter, 'SELECT pg_backend_pid();');
	$waiter->{in} .= q{SELECT payload FROM aq.dequeue('td_other_q', NULL::text, aq.dequeue_options(visibility => 'immediate', wait => '60')) AS d(m, payload, p);} . "\n";
	$waiter->{h}->pump_nb while length $waiter->{in};
	$node->poll_query_until('postgres', "SELECT wait_event_type = 'Extension' AND state = 'active' FROM pg_stat_activity WHERE pid = $waiter_pid")
	  or die 'the waiter does not wait';
	$node->safe_psql('postgres', q{SELECT aq.enqueue('td_q', 'meanwhile'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate'))});
	is($node->safe_psql('postgres', q{SELECT payload FROM aq.dequeue('td_q', NULL::text, aq.dequeue_options(visibility => 'immediate', wait => '0')) AS d(m, payload, p)}),
		'meanwhile', '6: another session\'s immediate enqueue and dequeue go through while the waiter waits');
	is($node->safe_psql('postgres', "SELECT state FROM pg_stat_activity WHERE pid = $waiter_pid"), 'active',
		'6: the waiter still waits');
	$node->safe_psql('postgres', q{SELECT aq.enqueue('td_other_q', 'awaited'::text)});
	my ($out, $err) = finish_pending($waiter);
	is($out, "awaited\n1", '6: the waiter takes the message committed later');
	finish($waiter);
}
$node->stop;

# 7. No worker slot.
my $small = PostgreSQL::Test::Cluster->new('immediate_dequeue_budget');
$small->init;
$small->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
max_worker_processes = 3
max_logical_replication_workers = 0
log_min_messages = warning
));
$small->start;
$small->safe_psql('postgres', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('td_qt', 'text');
SELECT aq.create_queue('td_q', 'td_qt');
SELECT aq.start_queue('td_q');
SELECT aq.enqueue('td_q', 'stays'::text);
});
my ($ret, $out, $err) = $small->psql('postgres',
	q{SELECT * FROM aq.dequeue('td_q', NULL::text, aq.dequeue_options(visibility => 'immediate', wait => '0'))},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/53400: no background worker slot is free for an immediate dequeue/, '7: no worker slot: 53400');
is($small->safe_psql('postgres', q{SELECT string_agg(user_data, ',') FROM td_qt}), 'stays', '7: the message stays');
$small->stop;

done_testing();
