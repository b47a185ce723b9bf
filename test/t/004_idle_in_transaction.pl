# A consumer that dequeues and then sits idle in its transaction is ended by
# idle_in_transaction_session_timeout: its messages are available again at once, and a
# dequeue that was waiting for them is woken (the abort wakes the queue's waiters).
use strict;
use warnings;

use IPC::Run;
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('idle_in_transaction');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'aq'\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('idle_qt', 'text');
SELECT aq.create_queue('idle_q', 'idle_qt');
SELECT aq.start_queue('idle_q');
SELECT aq.enqueue_array('idle_q', ARRAY['m1', 'm2', 'm3']);
});

# The idle consumer: takes all three messages, then stays idle in its transaction
# (psql runs a shell sleep between statements) until the server ends the session.
my ($idle_out, $idle_err) = ('', '');
my $timer = IPC::Run::timeout(60);
my $idle = IPC::Run::start(
	[ 'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres') ],
	'<', \(join("\n",
		"SET idle_in_transaction_session_timeout = '3s';",
		'BEGIN;',
		"SELECT count(*) FROM aq.dequeue_array('idle_q', NULL::text, 10, aq.dequeue_options(wait => '0'));",
		'\\! sleep 8',
		"SELECT 'still alive';",
		'')),
	'>', \$idle_out, '2>', \$idle_err, $timer);
$idle->pump until $idle_out =~ /^3$/m;   # psql reads its input only when pumped
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE state = 'idle in transaction'"),
	'the consumer holds the messages, idle in its transaction');

# A second consumer waits for messages while the first one holds them all.
my $started = time;
my ($wait_out, $wait_err) = ('', '');
my $waiter = IPC::Run::start(
	[ 'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres'), '-c',
	  "SELECT string_agg(payload, ',' ORDER BY msgid) FROM aq.dequeue_array('idle_q', NULL::text, 10, aq.dequeue_options(wait => '20 s'))" ],
	'>', \$wait_out, '2>', \$wait_err);
$waiter->finish;
my $waited = time - $started;

is($wait_out, "m1,m2,m3\n", 'the waiting consumer got the three messages after the timeout ended the idle one');
cmp_ok($waited, '<', 10, sprintf('it was woken when the idle session ended (%.2f s), not at the end of its 20 s wait', $waited));
$idle->finish;
like($idle_err, qr/idle-in-transaction timeout/, 'the idle consumer was ended by idle_in_transaction_session_timeout');
unlike($idle_out, qr/still alive/, 'and never got to run another statement');
is($node->safe_psql('postgres', 'SELECT count(*) FROM idle_qt'), '0', 'nothing is left in the queue');

$node->stop;
unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC|TRAP:/, 'server log shows no crash');
done_testing();
