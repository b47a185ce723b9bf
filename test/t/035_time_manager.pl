# Copyright: aq project.  PostgreSQL 15 TAP test (PostgreSQL::Test::Cluster).
#
# The time manager (src/queue/time_manager.hpp): expired messages reach their exception queues
# without any reader, on time, and nothing of it is lost by a restart or a kill -9.
#
#   1. A single-consumer queue nobody reads: a message expiring in 2 s is moved to the queue
#      table's exception queue by the time manager alone (no dequeue, browse or LISTEN runs); one
#      that does not expire stays.  aq.queue_monitor shows the round, the move and the lag.
#   2. A multi-consumer queue nobody reads: each subscriber's delivery expires the same way.
#   3. A delay that passes ends a LISTEN started after the enqueue (its rescan set to an hour).
#   4. A clean restart, then a kill -9 of the time manager's worker (a crash restart): messages
#      enqueued before, expiring after, are still moved without a reader (the times are read
#      back from the tables, not from the lost shared memory).
#   5. aq.tm_processes = 0: the worker leaves, and a dequeue from the normal queue moves the
#      expired message as before (maintenance.hpp, 3); turned back on, the time manager moves what
#      expired meanwhile (a time noted while it was off is kept).
#   6. Walks pass messages waiting for a delay once (time_manager.hpp, 8): empty dequeues do not
#      read 2,000 delayed messages again; once ready, all are delivered, each once.
#   7. 3,000 messages with delays of 0 to 0.3 s racing two consumers: each taken exactly once.
#   8. A multi-consumer delivery delayed behind two a subscriber takes: its message survives the
#      removal sweeps and is delivered when its delay passes.
#   9. The time manager turned off after a walk passed a delayed message: a waiting dequeue still
#      gets it when its delay passes.
#  10. aq.tm_processes = 1 and two databases, one with an expiration every second: the other's
#      expired message is moved while the busy one still has expirations to come.
#  11. A transaction's walk does not pass its own uncommitted delayed message.
#
# No fixed sleeps: poll_query_until.  Lags are printed, not asserted.
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
use AqSession;

my $node = PostgreSQL::Test::Cluster->new('time_manager');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
restart_after_crash = on
log_min_messages = warning
max_worker_processes = 16
));
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('tm_qt', 'text');
SELECT aq.create_queue('tm_q', 'tm_qt');
SELECT aq.start_queue('tm_q');
SELECT aq.create_queue('tm_dq', 'tm_qt');
SELECT aq.start_queue('tm_dq');
SELECT aq.create_queue_table('tm_mqt', 'text', multiple_consumers => true);
SELECT aq.create_queue('tm_mq', 'tm_mqt');
SELECT aq.start_queue('tm_mq');
SELECT aq.add_subscriber('tm_mq', aq.agent(s)) FROM unnest(ARRAY['A', 'B']) s;
CREATE FUNCTION where_is(payload text) RETURNS text LANGUAGE sql AS $$
  SELECT string_agg(q.queue_name, ',' ORDER BY q.queue_name) FROM tm_qt m JOIN aq.queues q ON q.queue_id = m.q_id
   WHERE m.user_data = payload $$;
});

# Waits until $sql returns 't' (poll_query_until); returns how long it took.
sub wait_for
{
	my ($sql, $what) = @_;
	my $t0 = time;
	ok($node->poll_query_until('postgres', $sql), $what);
	return time - $t0;
}

sub expired_count
{
	return $node->safe_psql('postgres', q{SELECT expired FROM aq.queue_monitor WHERE database = 'postgres'});
}

# ============================================================ 1. a single-consumer queue, no reader
$node->safe_psql('postgres', q{
SELECT aq.enqueue('tm_q', 'expires'::text, aq.message_properties(expiration => '2 s'));
SELECT aq.enqueue('tm_q', 'stays'::text, aq.message_properties(expiration => '1 hour'));
});
my $took = wait_for(q{SELECT where_is('expires') = 'aq$_tm_qt_e'},
	'1: the expired message is moved to the exception queue without a reader');
note sprintf('1: moved %.2f s after the enqueue (expiration 2 s)', $took);
ok($took >= 1.9, '1: not before it expired');
is($node->safe_psql('postgres', q{SELECT where_is('stays')}), 'tm_q', '1: the message that does not expire stays');
is($node->safe_psql('postgres', q{SELECT rounds > 0 AND expired >= 1 AND next_due IS NOT NULL AND failures = 0
	FROM aq.queue_monitor WHERE database = 'postgres'}), 't',
	'1: aq.queue_monitor shows the rounds, the move and the next due time (the other message)');
note '1: lag ', $node->safe_psql('postgres', q{SELECT last_lag || ' (max ' || max_lag || ')' FROM aq.queue_monitor WHERE database = 'postgres'});

# ============================================================ 2. a multi-consumer queue, no reader
$node->safe_psql('postgres', q{SELECT aq.enqueue('tm_mq', 'fans out'::text, aq.message_properties(expiration => '1 s'))});
wait_for(q{SELECT count(*) = 2 FROM aq.queue_health WHERE queue = 'aq$_tm_mqt_e' AND ready > 0},
	'2: both subscribers\' deliveries reach the exception queue without a reader');
is($node->safe_psql('postgres', q{SELECT coalesce(sum(ready + waiting + expired), 0) FROM aq.queue_health WHERE queue = 'tm_mq'}),
	'0', '2: nothing is left in the normal queue');

# ============================================================ 3. a delay wakes LISTEN
{
	my ($out, $err) = ('', '');
	my $t0 = time;
	$node->safe_psql('postgres', q{SELECT aq.enqueue('tm_dq', 'later'::text, aq.message_properties(delay => '2 s'))});
	# The listener started after the enqueue: only the delay's passing can end its wait early.
	my $rc = $node->psql('postgres', q{SET aq.wait_rescan_interval = '1h';
		SELECT (aq.listen(ARRAY[aq.agent(address => 'tm_dq')], wait => 120)).address},
		stdout => \$out, stderr => \$err);
	my $took3 = time - $t0;
	is($out, 'tm_dq', '3: LISTEN returns the queue once the delay passed');
	ok($took3 >= 1.9 && $took3 < 60, '3: ... well before its own wait or rescan would have ended');
	note sprintf('3: LISTEN returned %.2f s after a 2 s delay', $took3);
	is($node->safe_psql('postgres', q{SELECT payload FROM aq.dequeue('tm_dq', NULL::text)}), 'later', '3: and the message is there');
}

# ============================================================ 4. restart, and kill -9 of the worker
$node->safe_psql('postgres', q{SELECT aq.enqueue('tm_q', 'after restart'::text, aq.message_properties(expiration => '3 s'))});
$node->restart;
wait_for(q{SELECT where_is('after restart') = 'aq$_tm_qt_e'}, '4: after a restart, the expiry is still served');

$node->safe_psql('postgres', q{SELECT aq.enqueue('tm_q', 'after crash'::text, aq.message_properties(expiration => '4 s'))});
my $pid;
wait_for(q{SELECT pid IS NOT NULL FROM aq.queue_monitor WHERE database = 'postgres'}, '4: the time manager runs');
$pid = $node->safe_psql('postgres', q{SELECT pid FROM aq.queue_monitor WHERE database = 'postgres'});
kill9_backend($node, $pid);
is($node->safe_psql('postgres', q{SELECT where_is('after crash')}), 'tm_q', '4: not moved before it expires');
wait_for(q{SELECT where_is('after crash') = 'aq$_tm_qt_e'}, '4: after kill -9 of the time manager, the expiry is still served');

# ============================================================ 5. aq.tm_processes = 0
my $before = expired_count();
$node->append_conf('postgresql.conf', "aq.tm_processes = 0\n");
$node->reload;
$node->poll_query_until('postgres', q{SELECT current_setting('aq.tm_processes') = '0'});
wait_for(q{SELECT pid IS NULL FROM aq.queue_monitor WHERE database = 'postgres'},
	'5: with aq.tm_processes = 0 the time manager\'s worker leaves');
$node->safe_psql('postgres', q{SELECT aq.enqueue('tm_q', 'no manager'::text, aq.message_properties(expiration => '0 s'))});
is($node->safe_psql('postgres', q{SELECT payload FROM aq.dequeue('tm_q', NULL::text, aq.dequeue_options(wait => 0))}), 'stays',
	'5: a dequeue takes the next unexpired message ...');
is($node->safe_psql('postgres', q{SELECT where_is('no manager')}), 'aq$_tm_qt_e', '5: ... having moved the expired one first');
is(expired_count(), $before, '5: the dequeue moved it, not the time manager');
$node->safe_psql('postgres', q{SELECT aq.enqueue('tm_q', 'manager back'::text, aq.message_properties(expiration => '1 s'))});
$node->append_conf('postgresql.conf', "aq.tm_processes = 2\n");
$node->reload;
wait_for(q{SELECT where_is('manager back') = 'aq$_tm_qt_e'},
	'5: turned back on, the time manager moves what expired while it was off');
ok(expired_count() > $before, '5: ... itself');

# ============================================================ 6. walks pass delayed messages once
# 2,000 messages delayed by 4 s, then one ready: the first dequeue reads past the delayed ones and
# its floor passes them (time_manager.hpp, 8); the next dequeues, which find nothing, read a few
# index entries each instead of all 2,000 again.  When the delay passes, the time manager lowers
# the floor back: a waiting dequeue gets all 2,000, each once.
$node->safe_psql('postgres', q{
SELECT aq.create_queue_table('tm_fqt', 'text');
SELECT aq.create_queue('tm_fq', 'tm_fqt');
SELECT aq.start_queue('tm_fq');
SELECT aq.enqueue_array('tm_fq', array_agg('d' || i), array_agg(aq.message_properties(delay => '4 s')))
  FROM generate_series(1, 2000) i;
SELECT aq.enqueue('tm_fq', 'ready'::text);
});
my $reads_sql = q{SELECT pg_stat_force_next_flush(); SELECT idx_tup_read FROM pg_stat_user_indexes
	WHERE indexrelid = (SELECT indexrelid FROM pg_index WHERE indrelid = 'tm_fqt'::regclass AND indnatts = 3
	                      AND indkey[0] = 2 ORDER BY indexrelid LIMIT 1)};
sub index_reads { my @r = split /\n/, $node->safe_psql('postgres', $reads_sql); return $r[-1]; }
is($node->safe_psql('postgres', q{SELECT payload FROM aq.dequeue('tm_fq', NULL::text, aq.dequeue_options(wait => 0))}),
	'ready', '6: the ready message is taken past the 2,000 delayed ones');
# 20 empty dequeues of one session (which also looks from the head once: scan_floor.hpp).
my $r0 = index_reads();
is($node->safe_psql('postgres', q{
	DO $$ BEGIN
	  FOR i IN 1 .. 20 LOOP
	    BEGIN
	      PERFORM aq.dequeue('tm_fq', NULL::text, aq.dequeue_options(wait => 0));
	      RAISE 'dequeue % took a message', i;
	    EXCEPTION WHEN SQLSTATE 'QA228' THEN NULL;
	    END;
	  END LOOP;
	END $$; SELECT 'none ready'}), 'none ready', '6: 20 dequeues find nothing ready');
my $per_call = (index_reads() - $r0) / 20;
note "6: index entries read per empty dequeue: $per_call (2,000 delayed messages pending)";
ok($per_call < 200, '6: empty dequeues do not read the delayed messages again each time');
my $got = $node->safe_psql('postgres', q{
	SELECT count(*) || ' ' || count(DISTINCT payload) FROM aq.dequeue_array('tm_fq', NULL::text, 5000, aq.dequeue_options(wait => 30))});
is($got, '2000 2000', '6: once ready, all 2,000 are delivered, each once, by one waiting dequeue');

# ============================================================ 7. delays racing the walks
# A producer enqueues 3,000 messages with delays of 0 to 0.3 s in transactions of 10, while two
# consumers take them in batches with waits: every message is taken exactly once (a unique key
# on what they took), none is left.
$node->safe_psql('postgres', q{
SELECT aq.create_queue_table('tm_rqt', 'integer');
SELECT aq.create_queue('tm_rq', 'tm_rqt');
SELECT aq.start_queue('tm_rq');
CREATE TABLE tm_got (id integer PRIMARY KEY);
CREATE PROCEDURE tm_produce(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. n LOOP
    PERFORM aq.enqueue('tm_rq', i, aq.message_properties(delay => make_interval(secs => (i * 7919 % 300) / 1000.0)));
    IF i % 10 = 0 THEN COMMIT; END IF;
  END LOOP;
  COMMIT;
END $$;
CREATE PROCEDURE tm_consume(total int) LANGUAGE plpgsql AS $$
BEGIN
  WHILE (SELECT count(*) FROM tm_got) < total LOOP
    BEGIN
      INSERT INTO tm_got SELECT payload FROM aq.dequeue_array('tm_rq', NULL::integer, 20, aq.dequeue_options(wait => 1));
    EXCEPTION WHEN SQLSTATE 'QA228' THEN NULL;
    END;
    COMMIT;
  END LOOP;
END $$;
});
{
	my @procs;
	for my $sql ('CALL tm_consume(3000)', 'CALL tm_consume(3000)', 'CALL tm_produce(3000)')
	{
		my ($in, $out, $err) = ('', '', '');
		my $h = IPC::Run::start([ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-c', $sql ],
			\$in, \$out, \$err, IPC::Run::timeout(300));
		push @procs, [ $h, \$err ];
	}
	for my $p (@procs)
	{
		$p->[0]->finish;
		is(${ $p->[1] }, '', '7: a session ended without error (a duplicate would violate the key)');
	}
	is($node->safe_psql('postgres', q{SELECT count(*) || ' ' || min(id) || ' ' || max(id) FROM tm_got}), '3000 1 3000',
		'7: every message was taken exactly once');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM tm_rqt}), '0', '7: none is left');
}

# ============================================================ 8. a delayed delivery behind taken ones
# A subscriber's delivery delayed by 3 s, then two ready ones: the subscriber takes one (its
# transaction's removal sweep runs); the delayed delivery's message must still be there when its
# delay passes, and be delivered.
$node->safe_psql('postgres', q{
SELECT aq.create_queue_table('tm_sqt', 'text', multiple_consumers => true);
SELECT aq.create_queue('tm_sq', 'tm_sqt');
SELECT aq.start_queue('tm_sq');
SELECT aq.add_subscriber('tm_sq', aq.agent('A'));
SELECT aq.enqueue('tm_sq', 'later'::text, aq.message_properties(delay => '3 s'));
SELECT aq.enqueue_array('tm_sq', ARRAY['one', 'two']);
});
is($node->safe_psql('postgres', q{SELECT payload FROM aq.dequeue('tm_sq', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0))}),
	'one', '8: the subscriber takes the first ready message past the delayed one');
is($node->safe_psql('postgres', q{SELECT payload FROM aq.dequeue('tm_sq', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0))}),
	'two', '8: and the second');
is($node->safe_psql('postgres', q{SELECT count(*) FROM ONLY tm_sqt WHERE user_data = 'later'}), '1',
	'8: the delayed delivery\'s message is kept by the removal sweeps');
is($node->safe_psql('postgres', q{SELECT payload FROM aq.dequeue('tm_sq', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 30))}),
	'later', '8: and delivered once its delay passed');

# ============================================================ 9. the time manager stopped after a walk passed a message
# A message delayed by 2 s is passed by a walk; then the time manager is turned off.  A waiting
# dequeue still gets it once its delay passed (it lowers the floor itself when it finds nothing).
$node->safe_psql('postgres', q{
SELECT aq.enqueue('tm_fq', 'late'::text, aq.message_properties(delay => '2 s'));
SELECT aq.enqueue('tm_fq', 'now'::text);
});
is($node->safe_psql('postgres', q{SELECT payload FROM aq.dequeue('tm_fq', NULL::text, aq.dequeue_options(wait => 0))}),
	'now', '9: a walk passes the delayed message and takes the ready one');
$node->append_conf('postgresql.conf', "aq.tm_processes = 0\n");
$node->reload;
$node->poll_query_until('postgres', q{SELECT current_setting('aq.tm_processes') = '0'});
wait_for(q{SELECT pid IS NULL FROM aq.queue_monitor WHERE database = 'postgres'}, '9: the time manager\'s worker left');
is($node->safe_psql('postgres', q{SELECT payload FROM aq.dequeue('tm_fq', NULL::text, aq.dequeue_options(wait => 30))}),
	'late', '9: a waiting dequeue gets the passed message once its delay passed');
# ============================================================ 10. one worker, two databases
# aq.tm_processes = 1: database postgres has a message expiring every second for 20 s, which would
# keep a worker there all along; a message expiring in database tm_other is still moved while
# postgres has expirations to come (the worker leaves after a round when another database waits).
$node->append_conf('postgresql.conf', "aq.tm_processes = 1\n");
$node->reload;
$node->poll_query_until('postgres', q{SELECT current_setting('aq.tm_processes') = '1'});
$node->safe_psql('postgres', q{
SELECT aq.create_queue_table('tm_bqt', 'text');
SELECT aq.create_queue('tm_bq', 'tm_bqt');
SELECT aq.start_queue('tm_bq');
SELECT aq.enqueue_array('tm_bq', array_agg('busy ' || i), array_agg(aq.message_properties(expiration => make_interval(secs => i))))
  FROM generate_series(1, 20) i;
});
$node->safe_psql('postgres', 'CREATE DATABASE tm_other');
$node->safe_psql('tm_other', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('tm_oqt', 'text');
SELECT aq.create_queue('tm_oq', 'tm_oqt');
SELECT aq.start_queue('tm_oq');
});
$node->poll_query_until('postgres', q{SELECT count(*) < 19 FROM tm_bqt m JOIN aq.queues q ON q.queue_id = m.q_id WHERE q.queue_name = 'tm_bq'})
  or die 'postgres\'s expirations are not served';
$node->safe_psql('tm_other', q{SELECT aq.enqueue('tm_oq', 'other'::text, aq.message_properties(expiration => '1 s'))});
ok($node->poll_query_until('tm_other', q{SELECT q.queue_name = 'aq$_tm_oqt_e' FROM tm_oqt m JOIN aq.queues q ON q.queue_id = m.q_id}),
	'10: the other database\'s expired message is moved');
my $left = $node->safe_psql('postgres', q{SELECT count(*) FROM tm_bqt m JOIN aq.queues q ON q.queue_id = m.q_id WHERE q.queue_name = 'tm_bq'});
note "10: postgres still had $left of 20 expirations to come";
ok($left > 0, '10: ... while the busy database still had expirations to come');

# ============================================================ 11. a transaction's own delayed message
# Session A enqueues 'mine' (delayed by 1 s) and, after another session moved the floor, a ready
# message, which it takes itself: its walk must not pass its own uncommitted 'mine', which no round
# of the time manager can see.  A commits once a round covered the delay; the next dequeue of the
# busy queue takes 'mine' before a newer message.
$node->append_conf('postgresql.conf', "aq.tm_processes = 3\n");
$node->reload;
$node->poll_query_until('postgres', q{SELECT current_setting('aq.tm_processes') = '3'});
$node->safe_psql('postgres', q{
SELECT aq.create_queue_table('tm_xqt', 'text');
SELECT aq.create_queue('tm_xq', 'tm_xqt');
SELECT aq.start_queue('tm_xq');
SELECT aq.enqueue('tm_xq', 'warm'::text);
SELECT payload FROM aq.dequeue('tm_xq', NULL::text, aq.dequeue_options(wait => 0));
});
{
	my $a = AqSession::session($node, 'postgres');
	AqSession::query($a, q{BEGIN; SELECT aq.enqueue('tm_xq', 'mine'::text, aq.message_properties(delay => '1 s'));});
	$node->safe_psql('postgres', q{
		SELECT aq.enqueue('tm_xq', 'other'::text);
		SELECT payload FROM aq.dequeue('tm_xq', NULL::text, aq.dequeue_options(wait => 0));});
	AqSession::query($a, q{SELECT aq.enqueue('tm_xq', 'ready'::text);});
	like(scalar AqSession::query($a, q{SELECT payload FROM aq.dequeue('tm_xq', NULL::text, aq.dequeue_options(wait => 0));}),
		qr/ready/, '11: the transaction takes its own ready message');
	my $t = $node->safe_psql('postgres', q{SELECT clock_timestamp() + interval '1 s'});
	$node->poll_query_until('postgres', qq{SELECT last_round > '$t' FROM aq.queue_monitor WHERE database = 'postgres'})
	  or die 'no round of the time manager after the delay';
	AqSession::query($a, 'COMMIT;');
	AqSession::finish($a);
}
$node->safe_psql('postgres', q{SELECT aq.enqueue('tm_xq', 'newer'::text)});
is($node->safe_psql('postgres', q{SELECT payload FROM aq.dequeue('tm_xq', NULL::text, aq.dequeue_options(wait => 0))}),
	'mine', '11: the committed delayed message comes before a newer one (the floor did not pass it)');

# ============================================================ 12. retention ends without a reader
$node->safe_psql('postgres', q{
SELECT aq.create_queue_table('tm_retqt', 'text');
SELECT aq.create_queue('tm_retq', 'tm_retqt', retention_time => '2 s');
SELECT aq.start_queue('tm_retq');
SELECT aq.create_queue_table('tm_retring', 'text', segments => 2);
SELECT aq.create_queue('tm_retr', 'tm_retring', retention_time => '2 s');
SELECT aq.start_queue('tm_retr');
SELECT aq.enqueue_array('tm_retq', ARRAY['r1', 'r2', 'r3']);
SELECT aq.enqueue_array('tm_retr', ARRAY['s1', 's2', 's3']);
});
my $t12 = time;
$node->safe_psql('postgres', q{
SELECT count(*) FROM aq.dequeue_array('tm_retq', NULL::text, 10);
SELECT count(*) FROM aq.dequeue_array('tm_retr', NULL::text, 10);
});
is($node->safe_psql('postgres', q{SELECT (SELECT count(*) FROM aq$tm_retqt WHERE msg_state = 'PROCESSED')
	|| ',' || (SELECT count(*) FROM aq$tm_retring WHERE msg_state = 'PROCESSED')}), '3,3',
	'12: the dequeued messages are kept as PROCESSED');
wait_for(q{SELECT NOT EXISTS (SELECT FROM tm_retqt) AND NOT EXISTS (SELECT FROM tm_retring)},
	'12: the time manager purges them when their retention ends, without a reader');
my $took12 = time - $t12;
note sprintf('12: purged %.2f s after the dequeue (retention 2 s)', $took12);
ok($took12 >= 1.9, '12: not before their retention ended');
# A table whose normal queues are all gone still has its retained messages purged: here one kept
# by a dequeue from its exception queue.
$node->safe_psql('postgres', q{
SELECT aq.create_queue_table('tm_xretqt', 'text');
SELECT aq.create_queue('tm_xretq', 'tm_xretqt');
SELECT aq.start_queue('tm_xretq');
SELECT aq.start_queue('aq$_tm_xretqt_e', enqueue => false);
SELECT aq.alter_queue('aq$_tm_xretqt_e', retention_time => '2 s');
SELECT aq.enqueue('tm_xretq', 'expires'::text, aq.message_properties(expiration => '0 s'));
});
wait_for(q{SELECT count(*) = 1 FROM "aq$tm_xretqt" WHERE queue = 'aq$_tm_xretqt_e'}, '12: the expired message reaches the exception queue');
$node->safe_psql('postgres', q{
SELECT payload FROM aq.dequeue('aq$_tm_xretqt_e', NULL::text);
SELECT aq.stop_queue('tm_xretq');
SELECT aq.drop_queue('tm_xretq');
});
is($node->safe_psql('postgres', q{SELECT msg_state FROM "aq$tm_xretqt"}), 'PROCESSED', '12: the exception queue keeps it as PROCESSED');
wait_for(q{SELECT NOT EXISTS (SELECT FROM tm_xretqt)},
	'12: with only its exception queue left, the table\'s retained message is purged on time');
# The ring's copies were written into its current segment; once purged, a rotation switches and
# truncates it like any other.
wait_for(q{SELECT count(*) = 0 FROM aq.queue_segments s JOIN aq.queue_tables t USING (queue_table_id),
	LATERAL aq._rotate_segments(t.relid, true) r WHERE t.queue_table = 'tm_retring' AND pg_relation_size(s.relid) > 0},
	'12: the ring\'s segments that held the purged copies are truncated');

# ============================================================ 13. a ring that stores each message once
$node->safe_psql('postgres', q{
SELECT aq.create_queue_table('tm_onceqt', 'text', multiple_consumers => true, segments => 3);
SELECT aq.create_queue('tm_onceq', 'tm_onceqt');
SELECT aq.start_queue('tm_onceq');
SELECT aq.add_subscriber('tm_onceq', aq.agent(s)) FROM unnest(ARRAY['A', 'B']) s;
SELECT aq.enqueue_array('tm_onceq', ARRAY['o1', 'o2', 'o3']);
SELECT count(*) FROM aq.dequeue_array('tm_onceq', NULL::text, 10, aq.dequeue_options(consumer_name => 'A'));
SELECT aq._switch_segment('tm_onceqt');
SELECT aq.enqueue('tm_onceq', 'o4'::text);
SELECT aq._switch_segment('tm_onceqt');
});
# Segment 0 holds o1-o3, which B has not taken: it stays, round after round.
my $rounds = $node->safe_psql('postgres', q{SELECT rounds FROM aq.queue_monitor WHERE database = 'postgres'});
$node->poll_query_until('postgres', qq{SELECT rounds > $rounds + 2 FROM aq.queue_monitor WHERE database = 'postgres'})
  or die 'no rounds of the time manager';
is($node->safe_psql('postgres', q{SELECT pg_relation_size('"tm_onceqt$0"') > 0}), 't',
	'13: a segment one subscriber has not finished is not truncated');
$node->safe_psql('postgres', q{SELECT count(*) FROM aq.dequeue_array('tm_onceq', NULL::text, 10, aq.dequeue_options(consumer_name => 'B'))});
wait_for(q{SELECT pg_relation_size('"tm_onceqt$0"') = 0 AND pg_relation_size('"tm_onceqt$0_r"') = 0},
	'13: once every subscriber took them, the time manager truncates the segment and its receipts');
is($node->safe_psql('postgres', q{SELECT string_agg(user_data, ',' ORDER BY msgid) FROM tm_onceqt}), 'o4',
	'13: the later segment\'s message stays');
# An expired message goes to the exception queue for each subscriber that has not taken it, with
# nobody reading the queue: A took it first, B gets its copy.
$node->safe_psql('postgres', q{
SELECT aq.start_queue('aq$_tm_onceqt_e', enqueue => false);
SELECT aq.enqueue('tm_onceq', 'o5'::text, aq.message_properties(expiration => '2 s'));
SELECT count(*) FROM aq.dequeue_array('tm_onceq', NULL::text, 10, aq.dequeue_options(consumer_name => 'A'));
});
wait_for(q{SELECT count(*) = 1 FROM tm_onceqt m JOIN aq.queues q ON q.queue_id = m.q_id
	WHERE q.queue_name = 'aq$_tm_onceqt_e' AND m.consumer_name = 'B' AND m.user_data = 'o5'},
	'13: the expired message reaches the exception queue as B\'s copy, with no reader');
is($node->safe_psql('postgres', q{SELECT count(*) FROM tm_onceqt m WHERE m.consumer_name = 'A'}), '0',
	'13: A, which took it, gets no copy');
is($node->safe_psql('postgres', q{SELECT expiration IS NULL FROM tm_onceqt WHERE user_data = 'o5' AND consumer_name IS NULL}), 't',
	'13: the message expires no more');

# ============================================================ 14. a multi-consumer ring's walks pass delayed messages once
# As in 6, for each subscriber of a ring that stores each message once (once_walk.hpp, 4): 2,000
# messages for every subscriber delayed by 4 s, then one ready; A takes it past them, and its next
# empty dequeues read a few index entries each instead of all 2,000 again (each re-read them before).
# When the delay passes, the time manager lowers every subscriber's floor: waiting dequeues of A and
# B get all 2,000, each once.
$node->safe_psql('postgres', q{
SELECT aq.create_queue_table('tm_foqt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('tm_foq', 'tm_foqt');
SELECT aq.start_queue('tm_foq');
SELECT aq.add_subscriber('tm_foq', aq.agent(s)) FROM unnest(ARRAY['A', 'B']) s;
SELECT aq.enqueue_array('tm_foq', array_agg('d' || i), array_agg(aq.message_properties(delay => '4 s')))
  FROM generate_series(1, 2000) i;
SELECT aq.enqueue('tm_foq', 'ready'::text);
});
my $once_reads_sql = q{SELECT pg_stat_force_next_flush(); SELECT idx_tup_read FROM pg_stat_user_indexes
	WHERE indexrelid = (SELECT indexrelid FROM pg_index WHERE indrelid = '"tm_foqt$0"'::regclass AND indnatts = 3
	                      AND indkey[0] = 2 ORDER BY indexrelid LIMIT 1)};
sub once_index_reads { my @r = split /\n/, $node->safe_psql('postgres', $once_reads_sql); return $r[-1]; }
is($node->safe_psql('postgres', q{SELECT payload FROM aq.dequeue('tm_foq', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0))}),
	'ready', '14: A takes the ready message past the 2,000 delayed ones');
$r0 = once_index_reads();
is($node->safe_psql('postgres', q{
	DO $$ BEGIN
	  FOR i IN 1 .. 20 LOOP
	    BEGIN
	      PERFORM aq.dequeue('tm_foq', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0));
	      RAISE 'dequeue % took a message', i;
	    EXCEPTION WHEN SQLSTATE 'QA228' THEN NULL;
	    END;
	  END LOOP;
	END $$; SELECT 'none ready'}), 'none ready', '14: 20 dequeues of A find nothing ready');
$per_call = (once_index_reads() - $r0) / 20;
note "14: index entries read per empty dequeue of a subscriber: $per_call (2,000 delayed messages pending)";
ok($per_call < 200, '14: a subscriber\'s empty dequeues do not read the delayed messages again each time');
is($node->safe_psql('postgres', q{
	SELECT count(*) || ' ' || count(DISTINCT payload) FROM aq.dequeue_array('tm_foq', NULL::text, 5000,
	       aq.dequeue_options(consumer_name => 'A', wait => 30))}),
	'2000 2000', '14: once ready, A gets all 2,000, each once, by one waiting dequeue');
is($node->safe_psql('postgres', q{
	SELECT count(*) || ' ' || count(DISTINCT payload) FROM aq.dequeue_array('tm_foq', NULL::text, 5000,
	       aq.dequeue_options(consumer_name => 'B', wait => 30))}),
	'2001 2001', '14: and B all 2,001');

$node->stop;
done_testing();
