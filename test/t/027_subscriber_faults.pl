# Copyright: aq project.  PostgreSQL 15 TAP test (PostgreSQL::Test::Cluster).
#
# Multi-consumer queues (aq 0.6.0) under crashes: each consumer's deliveries survive a crash
# restart exactly as that consumer left them.
#
#   1. kill -9 of a backend holding an uncommitted dequeue of subscriber A (a psql session
#      idle in its transaction): after the crash restart A receives those messages again
#      (attempts = 1), subscriber B, who dequeued and committed its own copies before, never
#      receives them again, and a second session of A that committed meanwhile keeps what it
#      took.
#   2. a postmaster crash (every process killed at once) while some consumers had committed
#      their dequeues, others held uncommitted ones, one had not dequeued at all, and an
#      enqueue was uncommitted: after the restart each consumer receives exactly the messages
#      it had not committed, once; the uncommitted enqueue is gone; the queue table is empty
#      once every recipient has its copy.
#   3. attempts per consumer across crashes (max_retries 1): A's uncommitted dequeue at a
#      postmaster crash is an attempt (its claim was in the WAL before the dequeue returned),
#      counted once, and stays counted across an immediate shutdown; A's second attempt (kill -9
#      of its backend) moves A's copy to the exception queue with retry_count 2, while B's
#      copy stays in the queue with retry_count 0 and is delivered to B with attempts 0.
#
# Accounting: every enqueue logs its ids with their recipients in enq_log in its transaction,
# every dequeue logs what it received in deq_log in the same statement, so a committed dequeue is
# a committed log row; in the end each consumer's logged ids must equal the ids sent to it, each
# once.  The server log must show no crash other than the intentional ones, and no internal error
# (XX000), PANIC or TRAP.
use strict;
use warnings;

use FindBin;
use IPC::Run;
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib $FindBin::Bin;
use AqCrash qw(kill9_backend kill_server);

my $t_start = time;
my $node    = PostgreSQL::Test::Cluster->new('subscriber_faults');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
restart_after_crash = on
log_min_messages = warning
log_error_verbosity = verbose
));
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
CREATE TYPE ev_t AS (id integer, body text);
-- what was enqueued, and to whom (written in the enqueue's transaction)
CREATE TABLE enq_log (queue text NOT NULL, id integer NOT NULL, recipients text[] NOT NULL);
-- what each consumer dequeued (written in the dequeue's statement); no unique constraint:
-- a duplicate must be countable, not prevented
CREATE TABLE deq_log (queue text NOT NULL, consumer text NOT NULL, id integer NOT NULL, msgid bigint NOT NULL,
                      attempts integer NOT NULL);
-- A committed dequeue of everything $2 has in $1 (up to 1000), logged; its ids in order, '-' for
-- none (QA228).
CREATE FUNCTION take(q text, c text, n integer DEFAULT 1000) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
    WITH d AS (SELECT msgid, (payload).id AS id, (message_properties).attempts AS attempts
                 FROM aq.dequeue_array(q, NULL::ev_t, n, aq.dequeue_options(consumer_name => c, wait => 0))),
         l AS (INSERT INTO deq_log SELECT q, c, id, msgid, attempts FROM d)
    SELECT string_agg(id::text, ' ' ORDER BY id) INTO r FROM d;
    RETURN r;
EXCEPTION WHEN SQLSTATE 'QA228' THEN
    RETURN '-';
END $$;
});

my $connstr = $node->connstr('postgres');

# The ids from $first to $last, as one enqueue_array into $queue with their recipients (the
# recipients the test expects: the subscribers whose rules match, or @$list when given as
# recipient_list), logged in the same transaction.  Returns the SQL (one transaction when run
# alone).
sub enqueue_sql
{
	my ($queue, $first, $last, $recipients, $list) = @_;
	my $props = $list
	  ? ', array_fill(aq.message_properties(recipient_list => ARRAY['
	  . join(', ', map { "aq.agent('$_')" } @$list)
	  . "]), ARRAY[$last - $first + 1])"
	  : '';
	return "INSERT INTO enq_log SELECT '$queue', g, $recipients FROM generate_series($first, $last) g; "
	  . "SELECT cardinality(aq.enqueue_array('$queue', ARRAY(SELECT ROW(g, 'm' || g)::ev_t "
	  . "FROM generate_series($first, $last) g ORDER BY g)$props));";
}

sub enqueue
{
	my ($queue, $first, $last, $recipients, $list) = @_;
	is($node->safe_psql('postgres', enqueue_sql($queue, $first, $last, $recipients, $list)),
		$last - $first + 1, "$queue: enqueued $first..$last");
}

sub take
{
	my ($queue, $consumer) = @_;
	return $node->safe_psql('postgres', "SELECT take('$queue', '$consumer')");
}

# The SQL of an uncommitted dequeue: up to $n of $consumer's messages of $queue, logged, printed
# as "got:<ids>".
sub held_dequeue_sql
{
	my ($queue, $consumer, $n) = @_;
	return "WITH d AS (SELECT msgid, (payload).id AS id, (message_properties).attempts AS attempts "
	  . "FROM aq.dequeue_array('$queue', NULL::ev_t, $n, aq.dequeue_options(consumer_name => '$consumer', wait => 0))), "
	  . "l AS (INSERT INTO deq_log SELECT '$queue', '$consumer', id, msgid, attempts FROM d) "
	  . "SELECT 'got:' || string_agg(id::text, ' ' ORDER BY id) || ' attempts:' || string_agg(DISTINCT attempts::text, ',') FROM d;";
}

# A session that runs @sql in a transaction and then sits idle in it (psql waits for more
# input).  Returns { h => handle, pid => backend pid, out => its output so far }.
my @held_errors;
sub hold
{
	my (@sql) = @_;
	my ($out, $err) = ('', '');
	my $in = join("\n", "SELECT 'pid:' || pg_backend_pid();", 'BEGIN;', @sql, "SELECT 'held';", '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose', '-d', $connstr ],
		'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(180));
	$h->pump until $out =~ /^held$/m || $err =~ /ERROR|FATAL/;
	die "the session did not get into its transaction: $err" unless $out =~ /^held$/m;
	my ($pid) = $out =~ /^pid:(\d+)$/m;
	return { h => $h, pid => $pid, out => $out, err => \$err };
}

# Ends a held session whose server side is gone.
sub drop_held
{
	my ($s) = @_;
	$s->{h}->kill_kill;
	push @held_errors, ${ $s->{err} } if ${ $s->{err} } =~ /XX000|PANIC/;
}

# Each consumer's logged ids equal the ids sent to it, each once.
sub check_accounts
{
	my ($queue, @consumers) = @_;
	for my $c (@consumers)
	{
		my ($got, $sent) = split /\|/, $node->safe_psql('postgres', qq{
SELECT (SELECT coalesce(string_agg(id::text, ' ' ORDER BY id), '') FROM deq_log WHERE queue = '$queue' AND consumer = '$c'),
       (SELECT coalesce(string_agg(id::text, ' ' ORDER BY id), '') FROM enq_log WHERE queue = '$queue' AND '$c' = ANY (recipients))});
		$sent //= '';
		is($got, $sent, "$queue: $c received every message sent to it exactly once");
		is($node->safe_psql('postgres',
			"SELECT count(*) - count(DISTINCT msgid) FROM deq_log WHERE queue = '$queue' AND consumer = '$c'"),
			'0', "$queue: no msgid received twice by $c");
	}
}

# What is waiting, per consumer, in the queue's order: "<consumer>: <id>/<retry_count> ...".
sub waiting
{
	my ($qt, $queue) = @_;
	return $node->safe_psql('postgres', qq{
SELECT string_agg(consumer_name || ':' || ids, '; ' ORDER BY consumer_name) FROM (
  SELECT consumer_name, string_agg((user_data).id || '/' || retry_count, ' ' ORDER BY (user_data).id) AS ids
    FROM "aq\$$qt" WHERE queue = '$queue' GROUP BY consumer_name) w});
}

# Waits until the crash's attempts are counted: no delivery row of $qt is claimed by a
# transaction that did not commit (the settler's scan after the restart updates each one).
sub wait_settled
{
	my ($qt, $what) = @_;
	ok($node->poll_query_until('postgres',
		qq{SELECT count(*) = 0 FROM ONLY "aq\$_${qt}_i" WHERE xmax <> '0' AND NOT aq._claimable(tableoid, ctid)}),
		"$what: the settler counted the crash's attempts");
}

# ============================================================================ 1. kill -9 of A
$node->safe_psql('postgres', q{
SELECT aq.create_queue_table('k_qt', 'ev_t', multiple_consumers => true);
SELECT aq.create_queue('k_q', 'k_qt', max_retries => 5, retry_delay => '0');
SELECT aq.start_queue('k_q');
SELECT aq.add_subscriber('k_q', aq.agent(s)) FROM unnest(ARRAY['A', 'B']) s;
});
enqueue('k_q', 1, 10, q{ARRAY['A', 'B']});
is(take('k_q', 'B'), '1 2 3 4 5 6 7 8 9 10', 'kill -9: B takes and commits its copies of 1..10');
{
	my $s = hold(held_dequeue_sql('k_q', 'A', 5));
	like($s->{out}, qr/^got:1 2 3 4 5 attempts:0$/m, 'kill -9: a session of A holds 1..5 uncommitted');
	enqueue('k_q', 11, 15, q{ARRAY['A', 'B']});
	# Another session of A skips what the first one holds, and commits what it takes.
	is($node->safe_psql('postgres', "SELECT take('k_q', 'A', 3)"), '6 7 8',
		'kill -9: a second session of A skips the held messages and commits 6..8');
	kill9_backend($node, $s->{pid});
	drop_held($s);
}
wait_settled('k_qt', 'kill -9');
is(waiting('k_qt', 'k_q'), 'A:1/1 2/1 3/1 4/1 5/1 9/0 10/0 11/0 12/0 13/0 14/0 15/0; B:11/0 12/0 13/0 14/0 15/0',
	'kill -9: A has 1..5 back with one attempt each, B has only what it never took');
is(take('k_q', 'A'), '1 2 3 4 5 9 10 11 12 13 14 15', 'kill -9: A receives 1..5 again, and the rest');
is($node->safe_psql('postgres',
	"SELECT string_agg(id || '/' || attempts, ' ' ORDER BY id) FROM deq_log WHERE queue = 'k_q' AND consumer = 'A' AND id <= 5"),
	'1/1 2/1 3/1 4/1 5/1', 'kill -9: redelivered with attempts = 1');
is(take('k_q', 'B'), '11 12 13 14 15', 'kill -9: B receives nothing twice');
is(take('k_q', 'A') . ' ' . take('k_q', 'B'), '- -', 'kill -9: nothing is left for either');
check_accounts('k_q', 'A', 'B');

# ============================================================================ 2. postmaster crash
# Subscribers A and B receive every message, C those with an even id (its rule); 21 and 22 go
# by recipient_list to A and D (D is not a subscriber).
$node->safe_psql('postgres', q{
SELECT aq.create_queue_table('p_qt', 'ev_t', multiple_consumers => true);
SELECT aq.create_queue('p_q', 'p_qt', max_retries => 5, retry_delay => '0');
SELECT aq.start_queue('p_q');
SELECT aq.add_subscriber('p_q', aq.agent(s)) FROM unnest(ARRAY['A', 'B']) s;
SELECT aq.add_subscriber('p_q', aq.agent('C'), rule => 'tab.user_data.id % 2 = 0');
});
my $abc = q{CASE WHEN g % 2 = 0 THEN ARRAY['A', 'B', 'C'] ELSE ARRAY['A', 'B'] END};
enqueue('p_q', 1, 20, $abc);
enqueue('p_q', 21, 22, q{ARRAY['A', 'D']}, [ 'A', 'D' ]);
is(take('p_q', 'A'), join(' ', 1 .. 22), 'postmaster crash: A takes and commits 1..22');
is($node->safe_psql('postgres', "SELECT take('p_q', 'B', 4)"), '1 2 3 4', 'postmaster crash: B commits 1..4');
{
	my $b = hold(held_dequeue_sql('p_q', 'B', 8));
	like($b->{out}, qr/^got:5 6 7 8 9 10 11 12 attempts:0$/m, 'postmaster crash: B holds 5..12 uncommitted');
	my $c = hold(held_dequeue_sql('p_q', 'C', 100));
	like($c->{out}, qr/^got:2 4 6 8 10 12 14 16 18 20 attempts:0$/m,
		'postmaster crash: C holds its copies (the even ids) uncommitted');
	enqueue('p_q', 23, 25, $abc);
	# An enqueue that never commits: nobody may ever receive 100..102.
	my $e = hold(enqueue_sql('p_q', 100, 102, $abc));
	# D has not dequeued at all.
	my $left = kill_server($node);
	is($left, '', 'postmaster crash: every server process is gone');
	drop_held($_) for $b, $c, $e;
	$node->start;
}
wait_settled('p_qt', 'postmaster crash');
is(waiting('p_qt', 'p_q'),
	'A:23/0 24/0 25/0; '
	  . 'B:5/1 6/1 7/1 8/1 9/1 10/1 11/1 12/1 13/0 14/0 15/0 16/0 17/0 18/0 19/0 20/0 23/0 24/0 25/0; '
	  . 'C:2/1 4/1 6/1 8/1 10/1 12/1 14/1 16/1 18/1 20/1 24/0; D:21/0 22/0',
	'postmaster crash: each consumer has exactly what it had not committed (the held ones with an attempt)');
is($node->safe_psql('postgres', "SELECT count(*) FROM p_qt WHERE (user_data).id >= 100"), '0',
	'postmaster crash: the uncommitted enqueue is gone');
is(take('p_q', 'A'), '23 24 25', 'postmaster crash: A receives only what came after its commit');
is(take('p_q', 'B'), join(' ', 5 .. 20, 23 .. 25), 'postmaster crash: B receives 5..12 again and the rest');
is(take('p_q', 'C'), '2 4 6 8 10 12 14 16 18 20 24', 'postmaster crash: C receives its held copies again');
is(take('p_q', 'D'), '21 22', 'postmaster crash: D receives its recipient_list messages');
is(join(' ', map { take('p_q', $_) } qw(A B C D)), '- - - -', 'postmaster crash: nothing is left for anyone');
check_accounts('p_q', qw(A B C D));
is($node->safe_psql('postgres', q{SELECT count(*) FROM ONLY "aq$_p_qt_i"}), '0',
	'postmaster crash: no delivery row is left');
# A message goes with its last delivery or, when that was taken by a transaction that did not
# see the others gone, at a later dequeue's sweep of the queue: one more round (a message to A
# alone, which A takes) before the queue table must be empty.
note 'messages left before the extra round: ' . $node->safe_psql('postgres', 'SELECT count(*) FROM ONLY p_qt');
enqueue('p_q', 200, 200, q{ARRAY['A']}, ['A']);
is(take('p_q', 'A'), '200', 'postmaster crash: the extra round');
is($node->safe_psql('postgres', 'SELECT count(*) FROM ONLY p_qt'), '0',
	'postmaster crash: the queue table is empty once every recipient has its copy');

# ============================================================================ 3. attempts per consumer
$node->safe_psql('postgres', q{
SELECT aq.create_queue_table('r_qt', 'ev_t', multiple_consumers => true);
SELECT aq.create_queue('r_q', 'r_qt', max_retries => 1, retry_delay => '0');
SELECT aq.start_queue('r_q');
SELECT aq.start_queue('aq$_r_qt_e', enqueue => false);
SELECT aq.add_subscriber('r_q', aq.agent(s)) FROM unnest(ARRAY['A', 'B']) s;
});
enqueue('r_q', 1, 1, q{ARRAY['A', 'B']});
# Attempt 1: A's dequeue is uncommitted when the whole server is killed.  The dequeue returned,
# so its claim is in the WAL; the restart must find it and count it.
{
	my $s = hold(held_dequeue_sql('r_q', 'A', 10));
	like($s->{out}, qr/^got:1 attempts:0$/m, 'attempts: A holds 1 (first delivery)');
	my $left = kill_server($node);
	is($left, '', 'attempts: every server process is gone');
	drop_held($s);
	$node->start;
}
wait_settled('r_qt', 'attempts, postmaster crash');
is(waiting('r_qt', 'r_q'), 'A:1/1; B:1/0', 'attempts: the postmaster crash counted one attempt for A, none for B');
# A counted attempt is committed: it survives an immediate shutdown, and is not counted again.
$node->stop('immediate');
$node->start;
is(waiting('r_qt', 'r_q'), 'A:1/1; B:1/0', 'attempts: the count survives an immediate shutdown');
# Attempt 2: kill -9 of A's backend; past max_retries (1) A's copy moves to the exception queue.
{
	my $s = hold(held_dequeue_sql('r_q', 'A', 10));
	like($s->{out}, qr/^got:1 attempts:1$/m, 'attempts: A holds 1 again (second delivery, attempts = 1)');
	kill9_backend($node, $s->{pid});
	drop_held($s);
}
ok($node->poll_query_until('postgres',
	q{SELECT queue = 'aq$_r_qt_e' AND retry_count = 2 FROM "aq$r_qt" WHERE consumer_name = 'A'}),
	"attempts: A's copy is in the exception queue with retry_count 2");
is($node->safe_psql('postgres',
	q{SELECT string_agg(consumer_name || ' ' || queue || ' ' || retry_count || ' ' || msg_state, '; ' ORDER BY consumer_name) FROM "aq$r_qt"}),
	'A aq$_r_qt_e 2 EXPIRED; B r_q 0 READY', "attempts: B's copy is unaffected");
is(take('r_q', 'A'), '-', 'attempts: A gets nothing more from the queue');
is(take('r_q', 'B'), '1', 'attempts: B receives its copy');
is($node->safe_psql('postgres', "SELECT attempts FROM deq_log WHERE queue = 'r_q' AND consumer = 'B'"), '0',
	'attempts: with attempts = 0');
is($node->safe_psql('postgres', q{SELECT take('aq$_r_qt_e', 'B')}), '-', "attempts: B has nothing in the exception queue");
is($node->safe_psql('postgres', q{SELECT take('aq$_r_qt_e', 'A')}), '1', "attempts: A's copy is dequeued from the exception queue");
is($node->safe_psql('postgres', q{SELECT take('r_q', 'A') || ' ' || take('r_q', 'B') || ' ' || take('aq$_r_qt_e', 'A')}),
	'- - -', 'attempts: nothing is left');
# (As in 2: a later sweep removes a message whose last delivery went meanwhile.)
enqueue('r_q', 200, 200, q{ARRAY['A']}, ['A']);
is(take('r_q', 'A'), '200', 'attempts: the extra round');
is($node->safe_psql('postgres', q{SELECT (SELECT count(*) FROM ONLY r_qt) + (SELECT count(*) FROM ONLY "aq$_r_qt_i")}), '0',
	'attempts: the queue table and its delivery table are empty');

# ============================================================================ the server log
is(join("\n", @held_errors), '', 'the held sessions saw no internal error');
$node->stop;
my $log = slurp_file($node->logfile);
my $kills = () = $log =~ /terminated by signal 9/g;
# (A postmaster killed with its children reports nothing: only the two backends' deaths show.)
is($kills, 2, 'the server log shows the intentional kill -9s of the two backends');
unlike($log, qr/PANIC|TRAP:|terminated by signal (?!9)|exited with exit code (?![01]\b)\d+/, 'and no other crash');
unlike($log, qr/\bXX000\b/, 'no internal error (XX000) in the server log');
note sprintf('%.1f s in all', time - $t_start);
done_testing();
