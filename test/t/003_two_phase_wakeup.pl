# Two-phase commit and waiting dequeues.
#   - An enqueue that is only PREPAREd wakes nobody (it is invisible); its COMMIT PREPARED,
#     run by another session, wakes a waiting dequeue, which gets the message at once.
#   - A dequeue that is PREPAREd holds its message; ROLLBACK PREPARED returns it and wakes
#     the waiter.
#   - A dequeue that cannot wait (REPEATABLE READ) says so instead of sleeping for nothing.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('two_phase');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
max_prepared_transactions = 5
));
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('tp_qt', 'text');
SELECT aq.create_queue('tp_q', 'tp_qt');
SELECT aq.start_queue('tp_q');
});

# Starts a dequeue that waits up to 30 s; returns the running psql and its output buffer.
sub start_waiter
{
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres'), '-c',
		  "SELECT payload || '|' || (clock_timestamp() - statement_timestamp() < interval '10 s') "
		  . "FROM aq.dequeue('tp_q', NULL::text, aq.dequeue_options(wait => '30 s'))" ],
		'>', \$out, '2>', \$err);
	return ($h, \$out, \$err);
}

sub wait_until_sleeping
{
	ok( $node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE wait_event_type = 'Extension' AND query LIKE '%aq.dequeue(''tp_q''%'}),
		'the dequeue is asleep');
}

# 1. COMMIT PREPARED of an enqueue wakes the waiter.
$node->safe_psql('postgres',
	"BEGIN; SELECT aq.enqueue('tp_q', 'prepared message'::text); PREPARE TRANSACTION 'enq';");
my ($h, $out, $err) = start_waiter();
wait_until_sleeping();
$node->safe_psql('postgres', "COMMIT PREPARED 'enq'");
$h->finish;
is($$out, "prepared message|true\n", 'COMMIT PREPARED woke the waiter, which got the message well before its wait ran out');
is($$err, '', 'no error');

# 2. ROLLBACK PREPARED of a dequeue returns the message and wakes the waiter.
$node->safe_psql('postgres', "SELECT aq.enqueue('tp_q', 'held by a prepared dequeue'::text)");
$node->safe_psql('postgres',
	"BEGIN; SELECT * FROM aq.dequeue('tp_q', NULL::text, aq.dequeue_options(wait => '0')); PREPARE TRANSACTION 'deq';");
($h, $out, $err) = start_waiter();
wait_until_sleeping();
$node->safe_psql('postgres', "ROLLBACK PREPARED 'deq'");
$h->finish;
is($$out, "held by a prepared dequeue|true\n", 'ROLLBACK PREPARED woke the waiter, which got the returned message');

# 3. REPEATABLE READ: a dequeue that would have to wait fails at once with a clear error.
my ($rc, $stdout, $stderr) = $node->psql('postgres',
	"BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT clock_timestamp() AS t0 \\gset\n"
	. "SELECT * FROM aq.dequeue('tp_q', NULL::text, aq.dequeue_options(wait => '20 s'));\n",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($stderr, qr/0A000: no message available in queue "tp_q", and a dequeue cannot wait in a REPEATABLE READ/,
	'a waiting dequeue in REPEATABLE READ is refused with 0A000');
($rc, $stdout, $stderr) = $node->psql('postgres',
	"BEGIN ISOLATION LEVEL REPEATABLE READ;\n"
	. "SELECT * FROM aq.dequeue('tp_q', NULL::text, aq.dequeue_options(wait => '0'));\n",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($stderr, qr/QA228/, 'with wait => 0 it is the ordinary timeout');

$node->stop;
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC|TRAP:/, 'server log shows no crash');
done_testing();
