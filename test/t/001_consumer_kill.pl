
# Copyright: aq project.  PostgreSQL 15 TAP test (PostgreSQL::Test::Cluster).
#
# Producers and consumers under load while consumer backends are killed:
# alternately with kill -9 (the postmaster then restarts every backend, as
# restart_after_crash = on asks) and with pg_terminate_backend().  At the end the
# queue is drained and every message is accounted for:
#
#   - producers enqueue messages whose payload carries a unique id, and insert the
#     ids into enq_log IN THE SAME TRANSACTION; the client records a batch as
#     acknowledged only when psql reported the result of the transaction's last
#     statement (PostgreSQL reports a query string's last result after its commit);
#     a batch whose outcome was not reported (its backend was killed) is "unknown";
#   - consumers insert what they dequeued into deq_log IN THE SAME STATEMENT (so the
#     same transaction) as the dequeue: a committed dequeue is a committed log row.
#
# Checks: lost = 0 (acknowledged and never logged), duplicated = 0 (an id logged
# more than once), unexpected = 0 (a logged id that was neither acknowledged nor
# unknown); unknown ids that were logged count as "recovered".  The server-side
# enq_log gives the exact committed set, which must equal the dequeued set.
# The server log must show no "terminated by signal" other than the intentional
# kill -9s, and no PANIC or TRAP.
#
# Size (environment overrides): AQ_TAP_PRODUCERS (4), AQ_TAP_CONSUMERS (4),
# AQ_TAP_MESSAGES (20000 in all), AQ_TAP_KILL_INTERVAL (2 s between kill rounds),
# AQ_TAP_MAX_KILLS (24 rounds at most: odd rounds kill -9, even rounds
# pg_terminate_backend).  Children stop by themselves after 150 s at the latest.

use strict;
use warnings;

use POSIX ();
use Time::HiRes qw(time usleep);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $n_producers   = $ENV{AQ_TAP_PRODUCERS}     // 4;
my $n_consumers   = $ENV{AQ_TAP_CONSUMERS}     // 4;
my $n_messages    = $ENV{AQ_TAP_MESSAGES}      // 20000;
my $kill_interval = $ENV{AQ_TAP_KILL_INTERVAL} // 2;
my $max_kills     = $ENV{AQ_TAP_MAX_KILLS}     // 24;

# Hard limits: every child process exits by itself at $child_deadline, and the
# kill phase ends at $kill_deadline even if the producers are slow.
my $t_start        = time;
my $kill_deadline  = $t_start + 100;
my $child_deadline = $t_start + 150;

my $per_producer = int(($n_messages + $n_producers - 1) / $n_producers);

my $node = PostgreSQL::Test::Cluster->new('consumer_kill');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'aq'
restart_after_crash = on
max_connections = 40
log_statement = none
log_min_messages = warning
log_min_error_statement = panic
));
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION aq;
CREATE TYPE msg_t AS (id bigint, producer integer, body text);
SELECT aq.create_queue_table('aq_qt', 'msg_t');
SELECT aq.create_queue('aq_q', 'aq_qt');
SELECT aq.start_queue('aq_q');
-- what was enqueued (written in the enqueue's transaction)
CREATE TABLE enq_log (id bigint NOT NULL, producer integer NOT NULL);
-- what was dequeued (written in the dequeue's transaction); no unique constraint:
-- a duplicate must be countable, not prevented
CREATE TABLE deq_log (id bigint NOT NULL, msgid bigint NOT NULL, consumer integer NOT NULL,
                      at timestamptz NOT NULL DEFAULT clock_timestamp());
-- what the clients saw acknowledged ('A') or could not tell ('U'), loaded at the end
CREATE TABLE client_ranges (kind "char" NOT NULL, first_id bigint NOT NULL, last_id bigint NOT NULL);
});

my $connstr  = $node->connstr('postgres');
my $workdir  = PostgreSQL::Test::Utils::tempdir;
my $stopfile = "$workdir/stop";
my @psql     = ('psql', '-X', '-A', '-t', '-q', '-v', 'VERBOSITY=verbose', '-d', $connstr);

sub append_lines
{
	my ($file, @lines) = @_;
	open my $fh, '>>', $file or die "open $file: $!";
	print $fh @lines;
	close $fh;
	return;
}

# Runs psql with the given -c commands; returns (exit status, stdout, stderr).
sub run_psql_commands
{
	my (@commands) = @_;
	my ($out, $err) = ('', '');
	my @cmd = (@psql, map { ('-c', $_) } @commands);
	my $ok = eval {
		IPC::Run::run(\@cmd, '<', \undef, '>', \$out, '2>', \$err,
			IPC::Run::timeout(60));
		1;
	};
	return (-1, $out, $err . "\n(psql: $@)\n") unless $ok;
	return ($? >> 8, $out, $err);
}

# ---------------------------------------------------------------- producers

# Producer $p enqueues ids $p * 100_000_000 + seq until $per_producer were
# acknowledged.  Batches of 1..12 messages, five batches (five transactions) per
# psql run; enqueue_array and one-by-one aq.enqueue alternate.  Results go to
# $workdir/producer_$p.ranges as "A first last" / "U first last".
sub producer_main
{
	my ($p) = @_;
	$ENV{PGAPPNAME} = "aq_producer_$p";
	srand($$ ^ time);
	my $seq   = 0;
	my $acked = 0;
	my $file  = "$workdir/producer_$p.ranges";
	while ($acked < $per_producer && time < $child_deadline)
	{
		my (@batches, @commands);
		my $planned = $acked;
		for (1 .. 5)
		{
			my $size = 1 + int(rand(12));
			$size = $per_producer - $planned if $size > $per_producer - $planned;
			$planned += $size;
			last if $size <= 0;
			my $first = $p * 100_000_000 + $seq + 1;
			my $last  = $first + $size - 1;
			$seq += $size;
			push @batches, [ $first, $last ];
			my $log =
			  "INSERT INTO enq_log (id, producer) SELECT g, $p FROM generate_series($first, $last) g";
			my $enq =
			  rand() < 0.7
			  ? "SELECT 'ack $first $last ' || cardinality(aq.enqueue_array('aq_q', "
			  . "array_agg(ROW(g, $p, 'message ' || g)::msg_t ORDER BY g))) "
			  . "FROM generate_series($first, $last) g"
			  : "SELECT 'ack $first $last ' || count(aq.enqueue('aq_q', ROW(g, $p, 'message ' || g)::msg_t)) "
			  . "FROM generate_series($first, $last) g";
			# One query string = one implicit transaction; its last result is
			# reported only after the commit.
			push @commands, "$log; $enq";
		}
		my ($rc, $out, $err) = run_psql_commands(@commands);
		my %ack;
		while ($out =~ /^ack (\d+) (\d+) (\d+)$/mg)
		{
			$ack{$1} = 1 if $3 == $2 - $1 + 1;
		}
		my @lines;
		for my $b (@batches)
		{
			if ($ack{ $b->[0] })
			{
				push @lines, "A $b->[0] $b->[1]\n";
				$acked += $b->[1] - $b->[0] + 1;
			}
			else
			{
				push @lines, "U $b->[0] $b->[1]\n";
			}
		}
		append_lines($file, @lines);
		if ($rc != 0)
		{
			append_lines("$workdir/producer_$p.err", "rc=$rc\n$err");
			usleep(100_000);    # back off while the server restarts
		}
	}
	return;
}

# ---------------------------------------------------------------- consumers

# Consumer $c dequeues (wait 1 s) and logs in the same statement, four query
# strings per psql run: dequeue_array of 1..40, single aq.dequeue, or two
# dequeue_arrays in one (implicit) transaction.  QA228 (queue empty) is normal.
sub consumer_main
{
	my ($c) = @_;
	$ENV{PGAPPNAME} = "aq_consumer_$c";
	srand($$ ^ time);
	while (!-e $stopfile && time < $child_deadline)
	{
		my @commands;
		for (1 .. 4)
		{
			my $r     = rand();
			my $array = sub {
				my ($n, $wait) = @_;
				return
				    "INSERT INTO deq_log (id, msgid, consumer) SELECT (payload).id, msgid, $c "
				  . "FROM aq.dequeue_array('aq_q', NULL::msg_t, $n, aq.dequeue_options(wait => '$wait'))";
			};
			if ($r < 0.6)
			{
				push @commands, $array->(1 + int(rand(40)), '1 s');
			}
			elsif ($r < 0.85)
			{
				push @commands,
				    "INSERT INTO deq_log (id, msgid, consumer) SELECT (d.payload).id, d.msgid, $c "
				  . "FROM aq.dequeue('aq_q', NULL::msg_t, aq.dequeue_options(wait => '1 s')) d";
			}
			else
			{
				push @commands,
				  $array->(1 + int(rand(20)), '1 s') . '; '
				  . $array->(1 + int(rand(20)), '0.2 s');
			}
		}
		my ($rc, $out, $err) = run_psql_commands(@commands);
		append_lines("$workdir/consumer_$c.err", "rc=$rc\n$err") if $err ne '';
		usleep(100_000) if $rc >= 2 || $rc < 0;    # connection trouble: back off
	}
	return;
}

sub spawn
{
	my ($code, $arg) = @_;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		# Never run the END blocks of Test::More or the Cluster (which would
		# stop the node) in a child.
		eval { $code->($arg); 1 } or print STDERR "child failed: $@";
		POSIX::_exit(0);
	}
	return $pid;
}

my %producers = map { spawn(\&producer_main, $_) => $_ } 1 .. $n_producers;
my %consumers = map { spawn(\&consumer_main, $_) => $_ } 1 .. $n_consumers;

sub reap_producers
{
	for my $pid (keys %producers)
	{
		delete $producers{$pid} if waitpid($pid, POSIX::WNOHANG()) == $pid;
	}
	return scalar keys %producers;
}

# ---------------------------------------------------------------- killer

my (%killed9, $n_kill9, $n_terminated, $n_rounds);
$n_kill9 = $n_terminated = $n_rounds = 0;
my @restart_seconds;

# A consumer backend, preferably one in the middle of a dequeue or waiting in one.
sub pick_consumer_backend
{
	for (1 .. 40)
	{
		my ($rc, $out, $err) = $node->psql(
			'postgres', q{
SELECT pid FROM pg_stat_activity
 WHERE application_name LIKE 'aq_consumer_%' AND backend_type = 'client backend'
 ORDER BY state = 'active' DESC, random() LIMIT 1});
		return $out if $rc == 0 && defined $out && $out =~ /^\d+$/;
		note "looking for a consumer backend: $err" if $err ne '';
		usleep(50_000);
	}
	return undef;
}

while (reap_producers() > 0 && time < $kill_deadline && $n_rounds < $max_kills)
{
	Time::HiRes::sleep($kill_interval);    # pacing between kills, not synchronisation
	$n_rounds++;
	if ($n_rounds % 2 == 1)
	{
		my $pid = pick_consumer_backend();
		if (!defined $pid)
		{
			note "round $n_rounds: no consumer backend found";
			next;
		}
		my $offset = -s $node->logfile;
		my $t0     = time;
		next unless kill('KILL', $pid) == 1;
		$killed9{$pid} = 1;
		# The postmaster reports the crash, kills every backend and restarts.
		# (If the backend was already exiting by itself, there is no crash: the
		# kill is then not counted.)
		my $crashed;
		for (1 .. 50)
		{
			$crashed = 1, last
			  if slurp_file($node->logfile, $offset) =~ /\(PID $pid\) was terminated by signal 9/;
			usleep(100_000);
		}
		if (!$crashed)
		{
			note "round $n_rounds: kill -9 of $pid came too late (the backend had exited)";
			next;
		}
		$n_kill9++;
		note "round $n_rounds: kill -9 consumer backend $pid";
		$node->wait_for_log(qr/database system is ready to accept connections/, $offset);
		$node->poll_query_until('postgres', 'SELECT true')
		  or die "server did not come back after kill -9 of $pid";
		push @restart_seconds, time - $t0;
	}
	else
	{
		# Pick and terminate in one statement: the consumers' connections are
		# short-lived, so a pid picked by an earlier query may be gone already.
		# The materialized CTE keeps pg_terminate_backend() away from other rows.
		my $done;
		for (1 .. 40)
		{
			my ($rc, $out, $err) = $node->psql(
				'postgres', q{
WITH c AS MATERIALIZED (
  SELECT pid FROM pg_stat_activity
   WHERE application_name LIKE 'aq_consumer_%' AND backend_type = 'client backend'
   ORDER BY state = 'active' DESC, random())
SELECT pid FROM c WHERE pg_terminate_backend(pid, 5000) LIMIT 1});
			if ($rc == 0 && $out =~ /^(\d+)$/)
			{
				$done = $1;
				last;
			}
			usleep(50_000);
		}
		if (defined $done)
		{
			$n_terminated++;
			note "round $n_rounds: pg_terminate_backend($done)";
		}
	}
}
my $kill_phase = time - $t_start;
note sprintf("kill phase: %.1f s, %d rounds, %d kill -9 (restart %s s), %d pg_terminate_backend",
	$kill_phase, $n_rounds, $n_kill9, join(', ', map { sprintf('%.1f', $_) } @restart_seconds),
	$n_terminated);

# Producers finish by themselves (acknowledged target or deadline).
waitpid($_, 0) for keys %producers;
%producers = ();
note sprintf("producers done after %.1f s", time - $t_start);

# Consumers drain the queue.
ok( $node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM aq_qt'),
	'consumers drained the queue');
note sprintf("queue drained after %.1f s", time - $t_start);

append_lines($stopfile, "stop\n");
waitpid($_, 0) for keys %consumers;
%consumers = ();

# Anything left (there should be nothing) is drained here, logged the same way.
my ($drain_rc, $drain_out, $drain_err) = $node->psql(
	'postgres', q{
\set VERBOSITY verbose
INSERT INTO deq_log (id, msgid, consumer)
SELECT (payload).id, msgid, 0
  FROM aq.dequeue_array('aq_q', NULL::msg_t, 100000, aq.dequeue_options(wait => '0'));
}, on_error_stop => 0);
like($drain_err, qr/QA228/, 'final drain finds the queue empty (QA228)');

ok(!grep({ -s "$workdir/producer_$_.ranges" == 0 } 1 .. $n_producers),
	'every producer recorded results');

# ---------------------------------------------------------------- accounting

my @values;
for my $p (1 .. $n_producers)
{
	open my $fh, '<', "$workdir/producer_$p.ranges" or die "producer $p: $!";
	while (<$fh>)
	{
		push @values, "('$1', $2, $3)" if /^([AU]) (\d+) (\d+)$/;
	}
	close $fh;
}
my $load = '';
while (my @chunk = splice(@values, 0, 1000))
{
	$load .= 'INSERT INTO client_ranges VALUES ' . join(',', @chunk) . ";\n";
}
$node->safe_psql('postgres', $load);

my $totals = $node->safe_psql(
	'postgres', q{
WITH acked AS (SELECT DISTINCT g AS id FROM client_ranges r, generate_series(r.first_id, r.last_id) g WHERE kind = 'A'),
     unknown AS (SELECT DISTINCT g AS id FROM client_ranges r, generate_series(r.first_id, r.last_id) g WHERE kind = 'U'),
     logged AS (SELECT id, count(*) AS n FROM deq_log GROUP BY id)
SELECT (SELECT count(*) FROM acked) AS acked,
       (SELECT count(*) FROM unknown) AS unknown,
       (SELECT count(*) FROM enq_log) AS enq_log,
       (SELECT count(*) FROM deq_log) AS deq_log,
       (SELECT count(*) FROM acked a WHERE NOT EXISTS (SELECT FROM logged l WHERE l.id = a.id)) AS lost,
       (SELECT coalesce(sum(n - 1), 0) FROM logged WHERE n > 1) AS duplicated,
       (SELECT count(*) FROM logged l
         WHERE NOT EXISTS (SELECT FROM acked a WHERE a.id = l.id)
           AND NOT EXISTS (SELECT FROM unknown u WHERE u.id = l.id)) AS unexpected,
       (SELECT count(*) FROM logged l WHERE EXISTS (SELECT FROM unknown u WHERE u.id = l.id)) AS recovered,
       (SELECT count(*) FROM enq_log e WHERE NOT EXISTS (SELECT FROM logged l WHERE l.id = e.id)) AS committed_not_dequeued,
       (SELECT count(*) FROM logged l WHERE NOT EXISTS (SELECT FROM enq_log e WHERE e.id = l.id)) AS dequeued_not_committed,
       (SELECT count(*) FROM acked a WHERE NOT EXISTS (SELECT FROM enq_log e WHERE e.id = a.id)) AS acked_not_committed,
       (SELECT count(*) - count(DISTINCT msgid) FROM deq_log) AS duplicated_msgid,
       (SELECT count(*) FROM aq_qt) AS remaining
});
my @names = qw(acked unknown enq_log deq_log lost duplicated unexpected recovered
  committed_not_dequeued dequeued_not_committed acked_not_committed duplicated_msgid remaining);
my %t;
@t{@names} = split /\|/, $totals;
diag(join(', ', map { "$_=$t{$_}" } @names));
diag(sprintf('%d kill -9, %d pg_terminate_backend, %.1f s in all',
	$n_kill9, $n_terminated, time - $t_start));

is($t{lost},                   0, 'lost = 0: every acknowledged enqueue was dequeued');
is($t{duplicated},             0, 'duplicated = 0: no id dequeued twice');
is($t{unexpected},             0, 'unexpected = 0: no dequeued id that was never enqueued');
is($t{committed_not_dequeued}, 0, 'every committed enqueue (enq_log) was dequeued');
is($t{dequeued_not_committed}, 0, 'every dequeued id was committed by its producer');
is($t{acked_not_committed},    0, 'every acknowledged enqueue is committed (enq_log)');
is($t{duplicated_msgid},       0, 'no msgid dequeued twice');
is($t{remaining},              0, 'queue table is empty');
# How much the producers got through by their deadline depends on the machine (a checked build on
# two busy cores once reached 18,124 of 20,000): the guarantee is exactly-once for what they did,
# so the count is reported, and the run must have overlapped the kills with real work.
diag("acknowledged $t{acked} of the target " . $per_producer * $n_producers);
cmp_ok($t{acked}, '>', 0, 'the producers acknowledged enqueues while consumers were killed');
cmp_ok($n_kill9,      '>=', 1, 'at least one consumer backend killed with kill -9');
cmp_ok($n_terminated, '>=', 1, 'at least one consumer backend terminated with pg_terminate_backend');

# ---------------------------------------------------------------- client errors

# SQLSTATEs seen by the clients; only the expected ones may appear.
my (%states, @odd);
for my $f (glob("$workdir/*.err"))
{
	my $text = slurp_file($f);
	while ($text =~ /^(?:psql:\S* )?(ERROR|FATAL|WARNING|PANIC):\s+([0-9A-Z]{5}): (.*)$/mg)
	{
		$states{"$1 $2"}++;
		push @odd, "$f: $1 $2: $3"
		  unless ($1 eq 'ERROR' && $2 eq 'QA228')
		  || ($1 eq 'FATAL'   && $2 =~ /^57P0[1-3]$/)
		  || ($1 eq 'WARNING' && $2 eq '57P02');
	}
}
note 'client SQLSTATEs: ' . join(', ', map { "$_ x $states{$_}" } sort keys %states);
is(scalar(@odd), 0, 'clients saw no unexpected errors') or diag(join("\n", @odd[ 0 .. ($#odd < 20 ? $#odd : 19) ]));

# ---------------------------------------------------------------- server log

$node->stop;
my $log = slurp_file($node->logfile);
my (@signalled, @unexpected_signal);
while ($log =~ /\(PID (\d+)\) was terminated by signal (\d+)/g)
{
	push @signalled, $1;
	push @unexpected_signal, "PID $1 signal $2" unless $killed9{$1} && $2 == 9;
}
is(scalar(@unexpected_signal), 0, 'no backend terminated by a signal other than the intentional kill -9s')
  or diag(join("\n", @unexpected_signal));
is(scalar(@signalled), $n_kill9, 'each intentional kill -9 shows in the log');
unlike($log, qr/\bPANIC:/,  'no PANIC in the server log');
unlike($log, qr/\bTRAP:/,   'no TRAP (assertion failure) in the server log');
unlike($log, qr/exited with exit code (?![01]\b)\d+/, 'no server process exited abnormally');

done_testing();
