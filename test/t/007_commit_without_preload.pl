# Commit modes (and the time manager, fast ingest) without shared_preload_libraries = 'aq': they cannot work (the system level
# lives in the postmaster's shared memory, the database and role levels are only seen at
# connection start), so they say so instead of being silently ignored — and the queues still
# work.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('no_preload');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION aq');

# Runs statements in one session; returns (exit code, stdout, stderr).
sub session
{
	my ($sql) = @_;
	my ($stdout, $stderr) = ('', '');
	my $rc = $node->psql('postgres', $sql, stdout => \$stdout, stderr => \$stderr,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return ($rc, $stdout, $stderr);
}

my ($rc, $out, $err) = session("LOAD 'aq'; SET aq.commit_wait = nowait;");
isnt($rc, 0, 'SET aq.commit_wait = nowait fails without preloading');
like($err, qr/aq's commit modes need aq in shared_preload_libraries/, 'the error says why');
like($err, qr/HINT:  Add 'aq' to shared_preload_libraries and restart the server/, 'and the hint says what to do');

($rc, $out, $err) = session("LOAD 'aq'; SET aq.commit_write = 'batch,nowait';");
isnt($rc, 0, 'SET aq.commit_write fails too');

($rc, $out, $err) = session("LOAD 'aq'; SET aq.commit_wait = wait; SHOW aq.commit_wait;");
is($rc, 0, 'the default value is accepted (RESET and SET to the default keep working)');

for my $function ('aq.commit_mode()', 'aq.commit_settings()', 'aq.last_commit()', 'aq.commit_stats()')
{
	($rc, $out, $err) = session("SELECT * FROM $function");
	like($err, qr/ERROR:  55000: aq's commit modes need aq in shared_preload_libraries/,
		"$function fails with 55000 and says why");
}
($rc, $out, $err) = session("CALL aq.commit('WRITE BATCH NOWAIT')");
like($err, qr/ERROR:  55000/, 'CALL aq.commit() fails with 55000');

# Before aq is loaded in a session, PostgreSQL keeps an aq.* setting as a placeholder; the
# moment aq loads, the setting is refused with a warning that says why.
($rc, $out, $err) = session("SET aq.commit_write = 'batch,nowait'; LOAD 'aq'; SHOW aq.commit_write;");
like($err, qr/WARNING:  .*aq's commit modes need aq in shared_preload_libraries/,
	'a placeholder set before aq was loaded is refused with a warning when aq loads');
unlike($out, qr/batch/, 'and it is not in force afterwards');

# The queues do not need shared memory: waits poll instead of sleeping.
$node->safe_psql('postgres', q{
	SELECT aq.create_queue_table('np_qt', 'text');
	SELECT aq.create_queue('np_q', 'np_qt');
	SELECT aq.start_queue('np_q');
});
is( $node->safe_psql('postgres', q{
	SELECT aq.enqueue('np_q', 'still works'::text) > 0;
	SELECT payload FROM aq.dequeue('np_q', NULL::text, aq.dequeue_options(wait => '1 s'));
}),
	"t\nstill works",
	'enqueue and dequeue work without preloading');

# Fast ingest needs the ring in shared memory: every entry point says so, with the remedy.
$node->safe_psql('postgres', 'CREATE TABLE fi (id int PRIMARY KEY)');
($rc, $out, $err) = session("SELECT aq.enable_fast_ingest('fi')");
like($err, qr/ERROR:  55000: fast ingest needs aq in shared_preload_libraries/,
	'aq.enable_fast_ingest fails with 55000 and says why');
like($err, qr/HINT:  Add aq to shared_preload_libraries/, 'and the hint says what to do');
for my $function ('aq.get_apply_hwm_seqid()', 'aq.write_end()', 'aq.writes_flush()',
	'aq.get_write_hwm_seqid()', 'aq.memoptimize_write_area')
{
	($rc, $out, $err) = session("SELECT * FROM $function");
	like($err, qr/ERROR:  55000: fast ingest needs aq in shared_preload_libraries/,
		"$function fails with 55000");
}
($rc, $out, $err) = session("LOAD 'aq'; INSERT /*+ MEMOPTIMIZE_WRITE */ INTO fi VALUES (1)");
like($err, qr/ERROR:  55000: fast ingest needs aq in shared_preload_libraries/,
	'a hinted insert fails with 55000 once aq is loaded');
($rc, $out, $err) = session("LOAD 'aq'; SET aq.memoptimize_write = on");
like($err, qr/aq.memoptimize_write needs aq in shared_preload_libraries/, 'SET aq.memoptimize_write = on is refused');
is($node->safe_psql('postgres', 'SELECT count(*) FROM fi'), '0', 'no row went anywhere');

# A multi-consumer queue consumed at SERIALIZABLE: with a settler a dequeue leaves its sweeps to it
# (deliveries.hpp, 3); without preloading there is none, and the dequeues sweep themselves, so the
# messages whose last delivery is taken still go.
$node->safe_psql('postgres', q{
SELECT aq.create_queue_table('np_mc', 'text', multiple_consumers => true);
SELECT aq.create_queue('np_mcq', 'np_mc');
SELECT aq.start_queue('np_mcq');
SELECT aq.add_subscriber('np_mcq', aq.agent(s)) FROM unnest(ARRAY['a', 'b']) s;
SELECT aq.enqueue_array('np_mcq', ARRAY['m1', 'm2']);
});
for my $consumer ('a', 'b')
{
	$node->safe_psql('postgres', qq{
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT count(*) FROM aq.dequeue_array('np_mcq', NULL::text, 10, aq.dequeue_options(consumer_name => '$consumer', wait => 0));
COMMIT;
});
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM ONLY np_mc'), '0',
	'SERIALIZABLE consumers of a multi-consumer queue: the delivered messages are removed without a settler');

# The time manager lives in shared memory too: its view says so, and without it a dequeue moves
# the expired messages of its queue table itself, as before (maintenance.hpp, 3).
($rc, $out, $err) = session("SELECT * FROM aq.queue_monitor");
like($err, qr/ERROR:  55000: the time manager needs aq in shared_preload_libraries/,
	'aq.queue_monitor fails with 55000 and says why');
like($err, qr/HINT:  Add 'aq' to shared_preload_libraries/, 'and the hint says what to do');
$node->safe_psql('postgres', q{
SELECT aq.enqueue('np_q', 'expired'::text, aq.message_properties(expiration => '0 s'));
SELECT aq.enqueue('np_q', 'fresh'::text);
});
is($node->safe_psql('postgres', q{SELECT payload FROM aq.dequeue('np_q', NULL::text, aq.dequeue_options(wait => 0))}),
	'fresh', 'without the time manager a dequeue passes the expired message ...');
is($node->safe_psql('postgres', q{SELECT q.queue_name FROM np_qt m JOIN aq.queues q ON q.queue_id = m.q_id WHERE m.user_data = 'expired'}),
	'aq$_np_qt_e', '... and moves it to the exception queue itself');

done_testing();
