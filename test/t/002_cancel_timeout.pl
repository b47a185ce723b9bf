
# Copyright: aq project.  PostgreSQL 15 TAP test (PostgreSQL::Test::Cluster).
#
# Interrupting a waiting dequeue:
#   - a dequeue with wait => '1 s' on an empty queue fails with QA228 after ~1 s
#     (wait => '0' at once);
#   - statement_timeout and pg_cancel_backend() end a waiting dequeue with SQLSTATE
#     57014 promptly (< 1 s after the timeout / the cancel);
#   - the messages that the cancelled (aborted) transaction had claimed are
#     available again at once, and a dequeue waiting for them is woken;
#   - the session works normally after a cancel (a new wait is woken by an enqueue);
#   - pg_terminate_backend() of a waiting dequeue gives its messages back too;
#   - the server log has no "terminated by signal", no PANIC, no TRAP.

use strict;
use warnings;

use Time::HiRes qw(time usleep);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('cancel_timeout');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'aq'
restart_after_crash = on
max_connections = 20
));
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION aq;
CREATE TYPE msg_t AS (id bigint, body text);
SELECT aq.create_queue_table('aq_qt', 'msg_t');
SELECT aq.create_queue('aq_q', 'aq_qt');
SELECT aq.start_queue('aq_q');
});

my $connstr = $node->connstr('postgres');

sub enqueue_ids
{
	my ($first, $last) = @_;
	$node->safe_psql('postgres',
		    "SELECT aq.enqueue_array('aq_q', array_agg(ROW(g, 'm' || g)::msg_t ORDER BY g)) "
		  . "FROM generate_series($first, $last) g");
	return;
}

# Runs a psql script (errors do not stop it); returns (stdout, stderr, seconds).
sub run_script
{
	my ($sql) = @_;
	my $t0 = time;
	my ($rc, $out, $err) =
	  $node->psql('postgres', "\\set VERBOSITY verbose\n$sql", on_error_stop => 0);
	return ($out, $err, time - $t0);
}

# ---------------------------------------------------------------- background sessions

# A psql reading from a pipe, with its own application_name.
sub session_start
{
	my ($name) = @_;
	my $s = { name => $name, in => '', out => '', err => '' };
	local $ENV{PGAPPNAME} = $name;
	$s->{h} = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-q', '-v', 'VERBOSITY=verbose', '-d', $connstr, '-f', '-' ],
		'<', \$s->{in}, '>', \$s->{out}, '2>', \$s->{err});
	session_send($s, "SELECT 'pid=' || pg_backend_pid();\n");
	session_wait($s, 'out', qr/^pid=(\d+)$/m);
	($s->{pid}) = $s->{out} =~ /^pid=(\d+)$/m;
	return $s;
}

sub session_send
{
	my ($s, $text) = @_;
	$s->{in} .= $text;
	$s->{h}->pump_nb;
	return;
}

# Pumps until $stream ('out' or 'err') matches; returns the time it matched.
sub session_wait
{
	my ($s, $stream, $re, $timeout) = @_;
	$timeout //= $PostgreSQL::Test::Utils::timeout_default;
	my $deadline = time + $timeout;
	while ($s->{$stream} !~ $re)
	{
		die "$s->{name}: timed out waiting for $re\nstdout: $s->{out}\nstderr: $s->{err}\n"
		  if time > $deadline;
		$s->{h}->pump_nb if $s->{h}->pumpable;
		usleep(2_000);
	}
	return time;
}

sub session_quit
{
	my ($s) = @_;
	$s->{in} .= "\\q\n" if $s->{h}->pumpable;
	$s->{h}->finish;
	return;
}

# Waits until the backend sleeps in aq's wait (wait event type Extension).
sub wait_until_waiting
{
	my ($pid) = @_;
	return $node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $pid");
}

my $ids = q{string_agg((payload).id::text, ',' ORDER BY (payload).id)};

# ---------------------------------------------------------------- QA228 on timeout

{
	my ($out, $err, $secs) = run_script(q{
SELECT clock_timestamp() AS t0 \gset
SELECT * FROM aq.dequeue('aq_q', NULL::msg_t, aq.dequeue_options(wait => '1 s'));
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz), 3);
});
	like($err, qr/ERROR:\s+QA228: no message available in queue "aq_q"/,
		'dequeue with wait 1 s on an empty queue: QA228');
	note "dequeue wait => 1 s: QA228 after $out s (server), " . sprintf('%.3f', $secs) . ' s (client)';
	cmp_ok($out, '>=', 0.99, 'QA228 not before the 1 s wait ran out');
	cmp_ok($out, '<',  1.5,  'QA228 soon after the 1 s wait ran out');

	($out, $err, $secs) = run_script(q{
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) FROM aq.dequeue_array('aq_q', NULL::msg_t, 10, aq.dequeue_options(wait => '1 s'));
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz), 3);
});
	like($err, qr/ERROR:\s+QA228:/, 'dequeue_array with wait 1 s on an empty queue: QA228');
	note "dequeue_array wait => 1 s: QA228 after $out s (server)";
	ok($out >= 0.99 && $out < 1.5, 'dequeue_array QA228 after ~1 s');

	($out, $err, $secs) = run_script(q{
SELECT clock_timestamp() AS t0 \gset
SELECT * FROM aq.dequeue('aq_q', NULL::msg_t, aq.dequeue_options(wait => '0'));
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz), 3);
});
	like($err, qr/ERROR:\s+QA228:/, 'dequeue with wait 0 on an empty queue: QA228');
	cmp_ok($out, '<', 0.5, 'wait 0 does not wait');
}

# ---------------------------------------------------------------- statement_timeout

{
	my ($out, $err) = run_script(q{
SET statement_timeout = '500ms';
SELECT clock_timestamp() AS t0 \gset
SELECT * FROM aq.dequeue('aq_q', NULL::msg_t, aq.dequeue_options(wait => NULL));
RESET statement_timeout;
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz), 3);
});
	like($err, qr/ERROR:\s+57014: canceling statement due to statement timeout/,
		'statement_timeout ends a dequeue waiting forever: 57014');
	note "statement_timeout 500ms, wait forever: 57014 after $out s";
	ok($out >= 0.45 && $out < 1.5, 'statement timeout is prompt (< 1 s after it fires)');

	($out, $err) = run_script(q{
SET statement_timeout = '300ms';
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) FROM aq.dequeue_array('aq_q', NULL::msg_t, 10, aq.dequeue_options(wait => '10 s'));
RESET statement_timeout;
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz), 3);
});
	like($err, qr/ERROR:\s+57014:/, 'statement_timeout shorter than the wait: 57014, not QA228');
	unlike($err, qr/QA228/, 'no QA228 when the statement timed out');
	note "statement_timeout 300ms, wait 10 s: 57014 after $out s";
	ok($out >= 0.25 && $out < 1.3, 'statement timeout during a 10 s wait is prompt');
}

# statement_timeout in a transaction that has claimed messages: they come back.
{
	enqueue_ids(101, 105);
	my ($out, $err) = run_script(qq{
BEGIN;
SELECT count(*) FROM aq.dequeue_array('aq_q', NULL::msg_t, 100, aq.dequeue_options(wait => '0'));
SET LOCAL statement_timeout = '300ms';
SELECT * FROM aq.dequeue('aq_q', NULL::msg_t, aq.dequeue_options(wait => NULL));
ROLLBACK;
SELECT $ids FROM aq.dequeue_array('aq_q', NULL::msg_t, 100, aq.dequeue_options(wait => '0'));
});
	like($err, qr/ERROR:\s+57014:/, 'timed-out dequeue in a transaction: 57014');
	is($out, "5\n101,102,103,104,105",
		'messages claimed by the timed-out transaction are available again');
}

# ---------------------------------------------------------------- pg_cancel_backend

# Session A claims 5 messages in a transaction and then waits; session W waits for
# messages.  Cancelling A aborts its transaction: A gets 57014 at once, and W is
# woken and gets A's 5 messages.
{
	enqueue_ids(201, 205);
	my $a = session_start('aq_t2_a');
	my $w = session_start('aq_t2_w');
	session_send(
		$a, q{
BEGIN;
SELECT 'claimed=' || count(*) FROM aq.dequeue_array('aq_q', NULL::msg_t, 100, aq.dequeue_options(wait => '0'));
SELECT * FROM aq.dequeue('aq_q', NULL::msg_t, aq.dequeue_options(wait => NULL));
});
	session_wait($a, 'out', qr/^claimed=5$/m);
	ok(wait_until_waiting($a->{pid}), 'session A waits after claiming 5 messages');

	session_send(
		$w, qq{
SELECT 'w_ids=' || $ids FROM aq.dequeue_array('aq_q', NULL::msg_t, 100, aq.dequeue_options(wait => '60 s'));
});
	ok(wait_until_waiting($w->{pid}), 'session W waits (the messages are claimed by A)');
	$w->{h}->pump_nb;
	is($w->{out} =~ /w_ids=/ ? 'got' : 'waiting', 'waiting', 'W got nothing while A holds the messages');

	my $t0 = time;
	is($node->safe_psql('postgres', "SELECT pg_cancel_backend($a->{pid})"), 't', 'pg_cancel_backend(A)');
	my $t1 = time;
	my $t_err = session_wait($a, 'err', qr/ERROR:\s+57014:/, 30);
	my $t_w   = session_wait($w, 'out', qr/^w_ids=[\d,]+$/m, 30);
	like($a->{err}, qr/ERROR:\s+57014: canceling statement due to user request/,
		'cancelled dequeue fails with 57014');
	note sprintf('cancel: 57014 %.3f s after pg_cancel_backend was issued (%.3f s after it returned); '
		  . 'W got the messages after %.3f s',
		$t_err - $t0, $t_err - $t1, $t_w - $t0);
	cmp_ok($t_err - $t0, '<', 1, 'cancelled dequeue ends < 1 s after the cancel');
	like($w->{out}, qr/^w_ids=201,202,203,204,205$/m,
		'messages claimed by the cancelled transaction went to the waiting session');
	cmp_ok($t_w - $t0, '<', 1, 'the waiting session was woken < 1 s after the cancel');

	# A's session is still usable after ROLLBACK.
	session_send($a, "ROLLBACK;\nSELECT 'a_alive=' || count(*) FROM aq.queues WHERE queue_type = 'normal_queue';\n");
	session_wait($a, 'out', qr/^a_alive=1$/m);
	pass('cancelled session is usable after ROLLBACK');
	session_quit($a);
	session_quit($w);
}

# Cancel of an autocommit dequeue_array waiting forever; afterwards the same session
# waits again and is woken by an enqueue (its wait state survived the cancel).
{
	my $b = session_start('aq_t2_b');
	session_send($b,
		"SELECT count(*) FROM aq.dequeue_array('aq_q', NULL::msg_t, 10, aq.dequeue_options(wait => NULL));\n"
	);
	ok(wait_until_waiting($b->{pid}), 'session B waits forever');
	my $t0 = time;
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($b->{pid})");
	my $t_err = session_wait($b, 'err', qr/ERROR:\s+57014:/, 30);
	note sprintf('cancel of an autocommit wait: 57014 after %.3f s', $t_err - $t0);
	cmp_ok($t_err - $t0, '<', 1, 'autocommit waiting dequeue_array cancelled < 1 s');

	session_send($b,
		"SELECT 'b_ids=' || $ids FROM aq.dequeue_array('aq_q', NULL::msg_t, 10, aq.dequeue_options(wait => '60 s'));\n"
	);
	ok(wait_until_waiting($b->{pid}), 'session B waits again after the cancel');
	$t0 = time;
	enqueue_ids(301, 302);
	my $t_got = session_wait($b, 'out', qr/^b_ids=[\d,]+$/m, 30);
	like($b->{out}, qr/^b_ids=301,302$/m, 'after a cancel the session is woken by an enqueue');
	note sprintf('wake-up after enqueue commit: %.3f s (includes the enqueuing psql)', $t_got - $t0);
	cmp_ok($t_got - $t0, '<', 1, 'wake-up is prompt');
	session_quit($b);
}

# ---------------------------------------------------------------- pg_terminate_backend

# A backend terminated while it waits with claimed messages: the messages come back
# and the server does not restart.
{
	enqueue_ids(401, 403);
	my $c = session_start('aq_t2_c');
	session_send(
		$c, q{
BEGIN;
SELECT 'claimed=' || count(*) FROM aq.dequeue_array('aq_q', NULL::msg_t, 100, aq.dequeue_options(wait => '0'));
SELECT * FROM aq.dequeue('aq_q', NULL::msg_t, aq.dequeue_options(wait => NULL));
});
	session_wait($c, 'out', qr/^claimed=3$/m);
	ok(wait_until_waiting($c->{pid}), 'session C waits after claiming 3 messages');
	is($node->safe_psql('postgres', "SELECT pg_terminate_backend($c->{pid}, 10000)"),
		't', 'pg_terminate_backend(C) returns once C is gone');
	session_wait($c, 'err', qr/FATAL:\s+57P01:/, 30);
	pass('terminated session got FATAL 57P01');
	$c->{h}->finish;

	my ($out, $err) = run_script(qq{
SELECT $ids FROM aq.dequeue_array('aq_q', NULL::msg_t, 100, aq.dequeue_options(wait => '0'));
});
	is($out, '401,402,403', 'messages claimed by the terminated backend are available again');
	is($err, '', 'no error dequeuing them');
}

# ---------------------------------------------------------------- server log

is($node->safe_psql('postgres', 'SELECT count(*) FROM aq_qt'), '0', 'queue is empty at the end');
$node->stop;
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal/, 'no process terminated by a signal');
unlike($log, qr/\bPANIC:/,             'no PANIC in the server log');
unlike($log, qr/\bTRAP:/,              'no TRAP (assertion failure) in the server log');
unlike($log, qr/all server processes terminated; reinitializing/, 'no crash restart');

done_testing();
