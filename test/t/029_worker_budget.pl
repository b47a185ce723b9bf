# Copyright: aq project.  PostgreSQL 15 TAP test (PostgreSQL::Test::Cluster).
#
# aq's background workers are a budget (RELIABILITY.md: "Background workers are a budget",
# "One shared worker running one role's code must not delay other roles' work", S7).  The
# settler's guarantees (src/queue/settler.hpp):
#
#   1. The smallest budget: max_worker_processes = 3 and no logical replication launcher leave
#      no slot for a settler beyond aq's three static workers.  A rollback does not wait for a
#      settler that cannot start, and the message is dequeued again by the next call (its
#      attempt is not counted); 140 messages rolled back by one session are all taken by
#      another (none stranded); the log says so once per stretch, not once per rollback.
#      (The rollback that finds the database not yet known to be starved waits for the settle,
#      at most a second: printed as "first".)
#   2. The launchers come back after pg_terminate_backend, and a rollback's attempt is counted
#      again afterwards.
#   3. One owner's slow trigger does not hold another owner's queues: the settler's UPDATE of
#      role A's queue table blocks in A's trigger (an advisory lock the test holds), yet role B's
#      rolled-back message is back, counted, within the wait; pg_terminate_backend ends the
#      blocked settler; once the lock is released A's attempt is counted exactly once.
#   4. Redelivery after a crash restart does not wait for the settlers' scans of every database:
#      with 12 databases holding queues, the 10 messages a killed consumer held in the last one
#      come back within the dequeue's wait.
#
# No fixed sleeps: poll_query_until and the dequeues' own (event-driven) waits.  Timings are
# printed, never asserted.
use strict;
use warnings;

use FindBin;
use IPC::Run;
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib $FindBin::Bin;
use AqCrash qw(kill9_backend);
use AqSession qw(query finish);

my $t_start = time;
my $node    = PostgreSQL::Test::Cluster->new('worker_budget');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
restart_after_crash = on
log_min_messages = warning
max_connections = 40
max_worker_processes = 3
max_logical_replication_workers = 0
));
$node->start;

# ---------------------------------------------------------------- an interactive session
# AqSession.pm: a psql process fed one statement at a time (query() returns its output and errors).
sub session { AqSession::session($node, @_) }

# Runs $sql in $s and returns how long it took (seconds) and its errors.
sub timed
{
	my ($s, $sql) = @_;
	my $t0 = time;
	my (undef, $err) = query($s, $sql);
	return (time - $t0, $err);
}

sub ms { sprintf('%.0f ms', 1000 * $_[0]) }

# ============================================================================ 1. smallest budget
# The names of aq's worker processes (children of the postmaster; the log writer has no
# database connection, so pg_stat_activity does not show it).
sub aq_processes
{
	open(my $fh, '<', $node->data_dir . '/postmaster.pid') or die "no postmaster.pid: $!";
	chomp(my $pm = <$fh>);
	close $fh;
	my @names;
	for my $pid (split ' ', `pgrep -P $pm`)
	{
		open(my $cmd, '<', "/proc/$pid/cmdline") or next;
		my $title = <$cmd> // '';
		close $cmd;
		$title =~ s/\0.*//s;
		push @names, $1 if $title =~ /: (aq [a-z ]+?)\s*$/;
	}
	return join(', ', sort @names);
}
is(aq_processes(), 'aq fast ingest launcher, aq log writer, aq settler launcher',
	'1 (budget): aq\'s three static workers fill max_worker_processes = 3');
# A database created after the server's start: its settler is first wanted by a rollback.
$node->safe_psql('postgres', 'CREATE DATABASE budget');
my $budget_oid = $node->safe_psql('postgres', q{SELECT oid FROM pg_database WHERE datname = 'budget'});
$node->safe_psql('budget', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('budget_qt', 'text');
SELECT aq.create_queue('budget_q', 'budget_qt', max_retries => 5, retry_delay => '0');
SELECT aq.start_queue('budget_q');
SELECT aq.enqueue('budget_q', 'again'::text);
});
{
	my $c = session('budget');
	my ($delivered, @rollback_times, @errors) = (0);
	for my $round (1 .. 20)
	{
		query($c, 'BEGIN;');
		my ($out, $err) = query($c,
			"SELECT payload FROM aq.dequeue('budget_q', NULL::text, aq.dequeue_options(wait => 5));");
		$delivered++ if $out eq 'again';
		push @errors, "round $round: $err" if $err ne '';
		my ($dt, $rerr) = timed($c, 'ROLLBACK;');
		push @rollback_times, $dt;
		push @errors, "round $round ROLLBACK: $rerr" if $rerr ne '';
	}
	is($delivered, 20, '1 (budget): the rolled-back message is dequeued again by each of 20 calls (wait => 5)');
	is(join("\n", @errors), '', '1 (budget): no dequeue timed out (QA228), no error');
	my $sum = 0;
	$sum += $_ for @rollback_times;
	my ($max) = sort { $b <=> $a } @rollback_times;
	diag(sprintf('1 (budget): ROLLBACK of a dequeue without a settler slot: mean %s, first %s, max %s (20 rollbacks)',
		ms($sum / 20), ms($rollback_times[0]), ms($max)));
	is($node->safe_psql('budget', q{SELECT count(*) FROM aq.dequeue('budget_q', NULL::text, aq.dequeue_options(wait => 5))}),
		'1', '1 (budget): a committed dequeue takes it');

	# 140 messages, each dequeued and rolled back by this session, then drained by another.
	$node->safe_psql('budget', q{SELECT aq.enqueue_array('budget_q', ARRAY(SELECT 'm' || g FROM generate_series(1, 140) g))});
	my @ids = split /\n/, $node->safe_psql('budget', 'SELECT msgid FROM budget_qt ORDER BY msgid');
	is(scalar @ids, 140, '1 (budget): 140 messages enqueued');
	my ($taken, $t0) = (0, time);
	@errors = ();
	for my $id (@ids)
	{
		query($c, 'BEGIN;');
		my ($out, $err) = query($c,
			"SELECT msgid FROM aq.dequeue('budget_q', NULL::text, aq.dequeue_options(msgid => $id, wait => 5));");
		$taken++ if $out eq $id;
		push @errors, "$id: $err" if $err ne '';
		(undef, $err) = query($c, 'ROLLBACK;');
		push @errors, "$id ROLLBACK: $err" if $err ne '';
	}
	my $span = time - $t0;
	is($taken, 140, '1 (budget): one session dequeued each of the 140 and rolled back');
	is(join("\n", @errors), '', '1 (budget): without an error');
	diag(sprintf('1 (budget): 140 x (BEGIN, dequeue, ROLLBACK) in %.2f s (%s per transaction)', $span, ms($span / 140)));
	finish($c);
	is($node->safe_psql('budget', q{
SELECT count(*) || ' ' || count(DISTINCT msgid)
  FROM aq.dequeue_array('budget_q', NULL::text, 1000, aq.dequeue_options(wait => 5))}),
		'140 140', '1 (budget): another session drains all 140 rolled-back messages (none stranded)');
	is($node->safe_psql('budget', 'SELECT count(*) FROM budget_qt'), '0', '1 (budget): the queue table is empty');
}
{
	my $log     = slurp_file($node->logfile);
	my $starved = () = $log =~ /no background worker slot is free for the settler of database $budget_oid\b/g;
	my $all     = () = $log =~ /no background worker slot is free for the settler/g;
	note "1 (budget): the log has $all such lines in all (the start's scans of the other databases included)";
	cmp_ok($starved, '>=', 1, '1 (budget): the log says no background worker slot is free for the settler (of budget)');
	cmp_ok($starved, '<', 140, "1 (budget): once per stretch, not per rollback ($starved times for 160 rollbacks)");
}

# ============================================================================ 2. launchers come back
$node->append_conf('postgresql.conf', "max_worker_processes = 8\n");
$node->restart;
$node->safe_psql('budget', q{SELECT aq.enqueue('budget_q', 'counted'::text)});
for my $type ('aq settler launcher', 'aq fast ingest launcher')
{
	ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = '$type'"),
		"2 (launchers): the $type runs");
	my $old = $node->safe_psql('postgres', "SELECT pid FROM pg_stat_activity WHERE backend_type = '$type'");
	is($node->safe_psql('postgres', "SELECT pg_terminate_backend($old)"), 't', "2 (launchers): the $type is terminated");
	ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = '$type' AND pid <> $old"),
		"2 (launchers): a new $type runs (another pid)");
}
{
	my ($rc, $out, $err) = $node->psql('budget', q{
BEGIN;
SELECT payload FROM aq.dequeue('budget_q', NULL::text, aq.dequeue_options(wait => 5));
ROLLBACK;});
	is($out . $err, 'counted', '2 (launchers): a dequeue after the restart of the settler launcher, rolled back');
	ok($node->poll_query_until('budget', q{SELECT retry_count = 1 FROM budget_qt WHERE user_data = 'counted'}),
		'2 (launchers): its attempt is counted (retry_count 1)');
	is($node->safe_psql('budget', q{
SELECT payload || ' ' || (message_properties).attempts FROM aq.dequeue('budget_q', NULL::text, aq.dequeue_options(wait => 5))}),
		'counted 1', '2 (launchers): the next dequeue returns it with attempts 1');
}

# ============================================================================ 3. a slow owner's trigger
# Two non-superusers own a queue table each in the same database (so one settler serves both).
# A's table has a BEFORE UPDATE trigger, run by the settler as A, that waits for an advisory
# lock the test holds.
$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
CREATE ROLE owner_a LOGIN;
CREATE ROLE owner_b LOGIN;
GRANT CREATE ON SCHEMA public TO owner_a, owner_b;
GRANT EXECUTE ON FUNCTION aq.create_queue_table(text, regtype, text, text, text, boolean, text, integer),
      aq.create_queue(text, text, integer, interval, interval, text, text),
      aq.start_queue(text, boolean, boolean) TO owner_a, owner_b;
CREATE TABLE terminated (pid integer);
});
for my $o ('a', 'b')
{
	my ($rc, $out, $err) = $node->psql('postgres', qq{
SELECT aq.create_queue_table('${o}_qt', 'text');
SELECT aq.create_queue('${o}_q', '${o}_qt', max_retries => 5, retry_delay => '0');
SELECT aq.start_queue('${o}_q');
SELECT aq.enqueue('${o}_q', '${o}1'::text);
}, connstr => $node->connstr('postgres') . " user=owner_$o", on_error_stop => 1);
	is($rc . $err, '0', "3 (slow trigger): owner_$o made its queue ${o}_q") or diag($err);
}
{
	my ($rc, $out, $err) = $node->psql('postgres', q{
CREATE TABLE public.a_settles (who name NOT NULL);
CREATE FUNCTION public.a_slow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_catalog.pg_advisory_xact_lock(4242);
  INSERT INTO public.a_settles VALUES (current_user);
  RETURN NEW;
END $$;
CREATE TRIGGER a_slow BEFORE UPDATE ON public.a_qt FOR EACH ROW EXECUTE FUNCTION public.a_slow();
}, connstr => $node->connstr('postgres') . ' user=owner_a', on_error_stop => 1);
	is($rc . $err, '0', '3 (slow trigger): owner_a put a lock-waiting UPDATE trigger on a_qt') or diag($err);
}
my $blocked_settler = q{
SELECT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
 WHERE a.backend_type = 'aq settler' AND l.locktype = 'advisory' AND NOT l.granted};
{
	my $log_offset = -s $node->logfile;
	my $lock       = session('postgres');
	is(query($lock, 'SELECT pg_advisory_lock(4242);'), '', '3 (slow trigger): the test holds the advisory lock');
	my $c = session('postgres');
	query($c, 'BEGIN;');
	is(query($c, q{SELECT payload FROM aq.dequeue('a_q', NULL::text, aq.dequeue_options(wait => 5));}), 'a1',
		'3 (slow trigger): a1 dequeued');
	my ($dt_a, $err_a) = timed($c, 'ROLLBACK;');
	is($err_a, '', '3 (slow trigger): and rolled back');
	ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM ($blocked_settler) s"),
		"3 (slow trigger): the settler waits for the lock in owner_a's trigger");
	query($c, 'BEGIN;');
	is(query($c, q{SELECT payload FROM aq.dequeue('b_q', NULL::text, aq.dequeue_options(wait => 5));}), 'b1',
		'3 (slow trigger): b1 dequeued');
	my ($dt_b, $err_b) = timed($c, 'ROLLBACK;');
	is($err_b, '', '3 (slow trigger): and rolled back while the settler is blocked in owner_a\'s trigger');
	diag(sprintf('3 (slow trigger): ROLLBACK of a_q\'s dequeue %s, of b_q\'s %s', ms($dt_a), ms($dt_b)));
	my $t0 = time;
	my ($out, $err) = query($c,
		q{SELECT payload || ' ' || (message_properties).attempts FROM aq.dequeue('b_q', NULL::text, aq.dequeue_options(wait => 10));});
	is($out . $err, 'b1 1', "3 (slow trigger): b1 is back, counted once (attempts 1), despite owner_a's trigger");
	diag(sprintf('3 (slow trigger): b1 dequeued again %s after its ROLLBACK returned', ms(time - $t0)));
	is($node->safe_psql('postgres', q{
SELECT retry_count || ' ' || (NOT aq._claimable(tableoid, ctid)) || ' ' || (SELECT count(*) FROM a_settles) FROM a_qt}),
		'0 true 0', '3 (slow trigger): meanwhile a1\'s attempt is still unsettled (the trigger has not passed)');
	is(query($lock, q{SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid();}), '1',
		'3 (slow trigger): and the test still holds the lock');
	# A dequeue of a_q skips the unsettled a1 (no uncounted delivery) and hints the settler,
	# which goes back into the trigger; it is terminated there.
	($out, $err) = query($c, q{SELECT payload FROM aq.dequeue('a_q', NULL::text, aq.dequeue_options(wait => 0));});
	like($err, qr/QA228/, '3 (slow trigger): a1 is not delivered while its attempt is unsettled');
	ok($node->poll_query_until('postgres', qq{
WITH s AS MATERIALIZED ($blocked_settler),
     t AS (INSERT INTO terminated SELECT pid FROM s WHERE pg_terminate_backend(pid) RETURNING pid)
SELECT count(*) = 1 FROM t}), '3 (slow trigger): pg_terminate_backend of the settler blocked in the trigger');
	$t0 = time;
	my $pid = $node->safe_psql('postgres', 'SELECT pid FROM terminated');
	ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
		'3 (slow trigger): ends it');
	diag(sprintf('3 (slow trigger): the terminated settler was gone after %s (polled)', ms(time - $t0)));
	like(slurp_file($node->logfile, $log_offset),
		qr/\[$pid\] FATAL:  terminating background worker "aq settler[^"]*" due to administrator command\n[^\n]*\[$pid\] CONTEXT:  SQL statement "SELECT pg_catalog\.pg_advisory_xact_lock\(4242\)"/,
		"3 (slow trigger): SIGTERM ended it inside owner_a's trigger (not its time limit)");
	is(query($lock, 'SELECT pg_advisory_unlock(4242);'), 't', '3 (slow trigger): the test releases the lock');
	($out, $err) = query($c,
		q{SELECT payload || ' ' || (message_properties).attempts FROM aq.dequeue('a_q', NULL::text, aq.dequeue_options(wait => 10));});
	is($out . $err, 'a1 1', '3 (slow trigger): a1 is back, counted exactly once (attempts 1)');
	is($node->safe_psql('postgres', q{SELECT string_agg(who, ' ') FROM a_settles}), 'owner_a',
		"3 (slow trigger): owner_a's trigger passed once, in a committed settle, as owner_a");
	finish($_) for $c, $lock;
}

# ============================================================================ 4. crash, 12 databases
# Twelve databases with aq and a queue of 10 messages (crash_02..12 are copies of crash_01).
$node->safe_psql('postgres', 'CREATE DATABASE crash_01');
$node->safe_psql('crash_01', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('c_qt', 'text');
SELECT aq.create_queue('c_q', 'c_qt', max_retries => 5, retry_delay => '0');
SELECT aq.start_queue('c_q');
SELECT aq.enqueue_array('c_q', ARRAY(SELECT 'c' || g FROM generate_series(1, 10) g));
});
$node->safe_psql('postgres', sprintf('CREATE DATABASE crash_%02d TEMPLATE crash_01', $_)) for 2 .. 12;
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_database WHERE datname LIKE 'crash\_%'}), '12',
	'4 (crash): 12 databases with a queue');
{
	my $c = session('crash_12');
	my $pid = query($c, 'SELECT pg_backend_pid();');
	query($c, 'BEGIN;');
	my $held = query($c, q{
SELECT string_agg(payload, ' ' ORDER BY msgid) FROM aq.dequeue_array('c_q', NULL::text, 10, aq.dequeue_options(wait => 5));});
	is($held, join(' ', map { "c$_" } 1 .. 10), '4 (crash): a consumer of crash_12 holds its 10 messages uncommitted');
	kill9_backend($node, $pid);
	my $t0 = time;
	$c->{h}->kill_kill;
	my ($rc, $out, $err) = $node->psql('crash_12', q{
SELECT string_agg(payload, ' ' ORDER BY msgid) || ' attempts ' || string_agg(DISTINCT (message_properties).attempts::text, ',')
  FROM aq.dequeue_array('c_q', NULL::text, 10, aq.dequeue_options(wait => 30))});
	my $dt = time - $t0;
	is($out . $err, join(' ', map { "c$_" } 1 .. 10) . ' attempts 1',
		'4 (crash): after the crash restart dequeue_array (wait => 30) returns all 10, attempts 1');
	diag(sprintf('4 (crash): from accepting connections again to the 10 messages dequeued: %s (12 databases)', ms($dt)));
}

# ============================================================================ the server log
$node->stop;
my $log = slurp_file($node->logfile);
my $kills = () = $log =~ /terminated by signal 9/g;
is($kills, 1, 'the server log shows the intentional kill -9');
unlike($log, qr/PANIC|TRAP:|terminated by signal (?!9)|exited with exit code (?![01]\b)\d+/, 'and no other crash');
unlike($log, qr/\bXX000\b/, 'no internal error (XX000) in the server log');
note sprintf('%.1f s in all', time - $t_start);
done_testing();
