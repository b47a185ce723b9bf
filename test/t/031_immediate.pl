# Copyright: aq project.  PostgreSQL 15 TAP test (PostgreSQL::Test::Cluster).
#
# Immediate enqueues under faults (src/queue/immediate.hpp, protocol 4, 6, 7, 8).  The worker is
# held inside a request by the queue table owner's trigger, which waits for an advisory lock the
# test holds; then:
#   1. pg_terminate_backend of the worker: the caller gets 57P01 and nothing was enqueued.
#   2. A cancel of the caller: it waits until the worker's outcome is known, then raises 57014
#      saying the enqueue committed, with its message id; the message is there once.
#   3. pg_terminate_backend of the caller: the worker still commits the request once.
#   4. kill -9 of the worker: the crash restart ends the caller too; nothing was enqueued.
#   5. kill -9 of the caller: the same, and immediate enqueues work again after the restart.
#   6. No background-worker slot for the worker (max_worker_processes = 3, aq's own three): 53400
#      at once, nothing stranded; without shared_preload_libraries: 55000 with a hint.
#   7. A cancel while the worker starts: the caller's error says what was committed.
#   8. Synchronous replication: the enqueue waits for the synchronous standby; a NOWAIT caller's
#      immediate enqueue and dequeue do not.
# No fixed sleeps: poll_query_until and the events themselves.
use strict;
use warnings;

use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib $FindBin::Bin;
use AqCrash qw(kill9_backend wait_crash_restart);
use AqSession qw(query finish);

my $node = PostgreSQL::Test::Cluster->new('immediate');
$node->init(allows_streaming => 1);  # max_wal_senders > 0: synchronous replication can be asked for (8)
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
restart_after_crash = on
log_min_messages = warning
));
$node->start;
sub session { AqSession::session($node, @_) }

$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('ti_qt', 'text');
SELECT aq.create_queue('ti_q', 'ti_qt');
SELECT aq.start_queue('ti_q');
CREATE FUNCTION ti_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.user_data LIKE 'held%' THEN PERFORM pg_advisory_xact_lock(4242); END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER ti_hold BEFORE INSERT ON ti_qt FOR EACH ROW EXECUTE FUNCTION ti_hold();
});

my $enqueue = q{SELECT aq.enqueue('ti_q', '%s'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate'))};

# The test holds the advisory lock; $caller starts an immediate enqueue of $payload that the
# worker's trigger blocks on.  Returns the caller's session and the worker's pid.
sub start_held
{
	my ($holder, $payload) = @_;
	query($holder, 'SELECT pg_advisory_lock(4242);');
	my $caller = session('postgres');
	my $caller_pid = query($caller, 'SELECT pg_backend_pid();');
	query($caller, "SET aq.immediate_timeout = '300s';");
	$caller->{in} .= sprintf($enqueue, $payload) . ";\n";
	$caller->{h}->pump_nb while length $caller->{in};
	$node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE backend_type = 'aq immediate' AND wait_event_type = 'Lock' AND wait_event = 'advisory'})
	  or do {
		$caller->{h}->pump_nb;
		diag("caller: out=[$caller->{out}] err=[$caller->{err}]");
		diag($node->safe_psql('postgres', q{SELECT string_agg(backend_type || '/' || coalesce(wait_event, '-') || '/' || left(query, 60), E'\n') FROM pg_stat_activity}));
		die 'the worker did not block in the trigger';
	  };
	my $worker = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'aq immediate'});
	return ($caller, $caller_pid, $worker);
}

sub rows_of
{
	my ($payload) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM ti_qt WHERE user_data = '$payload'");
}

# Waits until $caller's pending statement has finished; returns its errors.
sub finish_pending
{
	my ($caller) = @_;
	my ($out, $err) = query($caller, 'SELECT 1;');
	return $err;
}

my $holder = session('postgres');

# 1. The worker terminated while it runs the request.
{
	my ($caller, $caller_pid, $worker) = start_held($holder, 'held 1');
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($worker)");
	my $err = finish_pending($caller);
	like($err, qr/57P01: the immediate enqueue into queue "ti_q" did not commit/, '1: the caller learns that the terminated worker did not commit');
	query($holder, 'SELECT pg_advisory_unlock(4242);');
	is(rows_of('held 1'), '0', '1: nothing was enqueued');
	is(query($caller, sprintf($enqueue, 'after 1') . ' > 0;'), 't', '1: the next immediate enqueue starts a new worker');
	finish($caller);
}

# 2. A cancel of the caller while the worker runs its request.
{
	my ($caller, $caller_pid, $worker) = start_held($holder, 'held 2');
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($caller_pid)");
	# The cancel waits for the outcome: the caller is still waiting.
	$node->poll_query_until('postgres', "SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $caller_pid")
	  or die 'the caller is not waiting';
	query($holder, 'SELECT pg_advisory_unlock(4242);');
	my $err = finish_pending($caller);
	like($err, qr/57014: canceling statement due to user request/, '2: the cancel is raised once the outcome is known');
	like($err, qr/The immediate enqueue had committed before the cancel: 1 message\(s\), the first with msgid \d+/,
		'2: ... saying that the enqueue committed, with its message id');
	is(rows_of('held 2'), '1', '2: the message is there, once');
	finish($caller);
}

# 3. The caller terminated while the worker runs its request: the worker still commits it once.
{
	my ($caller, $caller_pid, $worker) = start_held($holder, 'held 3');
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($caller_pid)");
	query($holder, 'SELECT pg_advisory_unlock(4242);');
	$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $caller_pid")
	  or die 'the caller did not end';
	is(rows_of('held 3'), '1', '3: the request of a terminated caller committed once');
	$caller->{h}->kill_kill;
}

# 4. kill -9 of the worker mid-request.
{
	my ($caller, $caller_pid, $worker) = start_held($holder, 'held 4');
	kill9_backend($node, $worker);
	$caller->{h}->kill_kill;
	$holder->{h}->kill_kill;
	is(rows_of('held 4'), '0', '4: after kill -9 of the worker nothing was enqueued');
	$holder = session('postgres');
}

# 5. kill -9 of the caller mid-request.
{
	my ($caller, $caller_pid, $worker) = start_held($holder, 'held 5');
	kill9_backend($node, $caller_pid);
	$caller->{h}->kill_kill;
	$holder->{h}->kill_kill;
	is(rows_of('held 5'), '0', '5: after kill -9 of the caller nothing was enqueued');
	is($node->safe_psql('postgres', sprintf($enqueue, 'after 5') . ' > 0'), 't', '5: immediate enqueues work after the restart');
	$holder = session('postgres');
}
finish($holder);

# 7. A cancel (statement_timeout) while the worker starts: the caller's error and what was
#    committed agree.  Before, the cancel was acted on inside the wait for the worker's start and
#    left the request queued: the worker committed it after the caller got 57014.
{
	my $bad = 0;
	for my $i (1 .. 15)
	{
		$node->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'aq immediate'});
		$node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'aq immediate'})
		  or die 'the worker did not end';
		my ($ret, $out, $err) = $node->psql('postgres', "SET statement_timeout = '1ms'; " . sprintf($enqueue, "race $i"));
		my $rows = rows_of("race $i");
		my $committed_said = $ret == 0 || $err =~ /had committed/;
		$bad++ if ($committed_said ? $rows != 1 : $rows != 0);
	}
	is($bad, 0, '7: a cancel while the worker starts: the error (or success) says what was committed, 15 tries');
}

# 8. Synchronous replication: a WAIT caller's immediate enqueue waits for the synchronous
#    standby as its own commit would (before, the worker committed without it).
{
	$node->append_conf('postgresql.conf', "synchronous_standby_names = 'no_such_standby'\n");
	$node->reload;
	# The standby is required once an ordinary commit waits for it (the checkpointer publishes
	# the setting after the reload).
	my $probe = session('postgres');
	my $probe_pid = query($probe, 'SELECT pg_backend_pid();');
	$probe->{in} .= "SELECT aq.enqueue('ti_q', 'probe'::text);\n";
	$probe->{h}->pump_nb while length $probe->{in};
	$node->poll_query_until('postgres', "SELECT wait_event = 'SyncRep' FROM pg_stat_activity WHERE pid = $probe_pid")
	  or die 'an ordinary commit does not wait for the standby';
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($probe_pid)");
	finish_pending($probe);
	finish($probe);
	$node->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'aq immediate'});
	# A NOWAIT caller's immediate enqueue and dequeue do not wait for the standby (its commit mode
	# is the worker's commit's).
	my $nowait = session('postgres');
	query($nowait, 'SET aq.commit_wait = nowait;');
	my ($out, $err) = query($nowait, sprintf($enqueue, 'nowait') . ' > 0;');
	is("$out|$err", 't|', '8: a NOWAIT caller\'s immediate enqueue does not wait for the standby');
	($out, $err) = query($nowait,
		q{SELECT payload FROM aq.dequeue('ti_q', NULL::text, aq.dequeue_options(visibility => 'immediate', wait => '0', deq_condition => $$tab.user_data = 'nowait'$$)) AS d(m, payload, p);});
	is("$out|$err", 'nowait|', '8: nor its immediate dequeue');
	finish($nowait);
	my $caller = session('postgres');
	$caller->{in} .= sprintf($enqueue, 'synchronous') . ";\n";
	$caller->{h}->pump_nb while length $caller->{in};
	ok($node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'aq immediate' AND wait_event = 'SyncRep'}),
		'8: the worker waits for the synchronous standby');
	$node->append_conf('postgresql.conf', "synchronous_standby_names = ''\n");
	$node->reload;
	$err = finish_pending($caller);
	is($err, '', '8: the enqueue returns once the standby is no longer required');
	is(rows_of('synchronous'), '1', '8: committed once');
	finish($caller);
}
$node->stop;

# 6. No worker slot; no preloading.
my $small = PostgreSQL::Test::Cluster->new('immediate_budget');
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
SELECT aq.create_queue_table('ti_qt', 'text');
SELECT aq.create_queue('ti_q', 'ti_qt');
SELECT aq.start_queue('ti_q');
});
my ($ret, $out, $err) = $small->psql('postgres', sprintf($enqueue, 'no slot'), extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/53400: no background worker slot is free for an immediate enqueue/, '6: no worker slot: 53400');
is($small->safe_psql('postgres', q{SELECT aq.enqueue('ti_q', 'on commit'::text) > 0}), 't', '6: an on_commit enqueue still works');
is($small->safe_psql('postgres', q{SELECT string_agg(user_data, ',') FROM ti_qt}), 'on commit', '6: nothing stranded');
$small->stop;

$small->adjust_conf('postgresql.conf', 'shared_preload_libraries', "''");
$small->start;
($ret, $out, $err) = $small->psql('postgres', sprintf($enqueue, 'no preload'), extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/55000: immediate visibility needs aq in shared_preload_libraries/, '6: without preloading: 55000');
$small->stop;

done_testing();
