# Copyright: aq project.  PostgreSQL 15 TAP test (PostgreSQL::Test::Cluster).
#
# Ring queue tables (src/queue/ring.hpp) rotated by the time manager (time_manager.hpp, 9): what is
# consumed is reclaimed by truncation, whatever holds the xmin horizon.
#
#   1. An idle transaction holds an xid (the horizon) while 40,000 messages go through a ring of 3
#      segments and through a classic queue table: VACUUM can reclaim nothing of either, but the
#      time manager switches and truncates the ring's segments, so the ring ends small (at most
#      the current segment plus one) while the classic table keeps every consumed message.  Every
#      message is taken exactly once.
#   2. A message left in a sealed segment (a queue nobody reads) does not jam the ring: when the ring
#      comes round to it, the time manager carries it forward into the current segment, unchanged,
#      and truncates the segment; the message is there, once, when its consumer comes.
#   3. A REPEATABLE READ reader that read the table holds its segments: the time manager does not
#      wait for it and does not truncate them (aq.queue_monitor shows no failure), and does once the
#      reader is gone.
#   4. kill -9 of the time manager's worker while it rotates (a crash restart): no message is lost
#      or delivered twice, and rotation goes on after the restart (the ledger and the segments on
#      disk are the state; nothing of shared memory is needed).
#   4b. The same through an immediate shutdown of the postmaster mid-rotation (crash recovery).
#   5. A ring owned by a role with no rights but over its own queue table: the time manager
#      switches, carries forward and truncates as that owner, and no round fails.
#
# No fixed sleeps: poll_query_until.
use strict;
use warnings;

use FindBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib $FindBin::Bin;
use AqCrash qw(kill9_backend);
use AqSession qw(session query finish);

my $node = PostgreSQL::Test::Cluster->new('rotation');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
restart_after_crash = on
log_min_messages = warning
max_worker_processes = 16
aq.segment_size = '256kB'
aq.segment_max_age = '1s'
));
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('rot_ring', 'text', segments => 3);
SELECT aq.create_queue('rot_q', 'rot_ring');
SELECT aq.start_queue('rot_q');
SELECT aq.create_queue_table('rot_classic', 'text');
SELECT aq.create_queue('rot_cq', 'rot_classic');
SELECT aq.start_queue('rot_cq');
CREATE TABLE got (payload text);
-- Rounds of enqueue + dequeue of n messages each, every one its own transaction.
CREATE PROCEDURE churn(queue text, rounds integer, n integer, tag text) LANGUAGE plpgsql AS $$
BEGIN
  FOR r IN 1 .. rounds LOOP
    PERFORM aq.enqueue_array(queue, (SELECT array_agg(format('%s-%s-%s-%s', tag, r, i, repeat('x', 150))) FROM generate_series(1, n) i));
    COMMIT;
    INSERT INTO got SELECT payload FROM aq.dequeue_array(queue, NULL::text, n, aq.dequeue_options(wait => 0));
    COMMIT;
  END LOOP;
END $$;
CREATE FUNCTION ring_bytes() RETURNS bigint LANGUAGE sql AS $$
  SELECT sum(pg_relation_size(s.relid))::bigint FROM aq.queue_segments s JOIN aq.queue_tables t USING (queue_table_id)
   WHERE t.queue_table = 'rot_ring' $$;
CREATE FUNCTION generations() RETURNS bigint LANGUAGE sql AS $$
  SELECT max(generation) FROM aq.segment_log l JOIN aq.queue_tables t USING (queue_table_id) WHERE t.queue_table = 'rot_ring' $$;
});

sub wait_for
{
	my ($query, $name) = @_;
	ok($node->poll_query_until('postgres', $query), $name);
}

# ============================================================ 1. a held horizon
my $holder = session($node, 'postgres');
query($holder, q{BEGIN; SELECT txid_current();});
# Six times: 5,000 messages through each table, then until the time manager switched the ring.  With
# 3 segments, the sixth generation writes a segment for the third time: each was truncated first.
for my $i (1 .. 6)
{
	my $g = $node->safe_psql('postgres', q{SELECT generations()});
	$node->safe_psql('postgres', qq{CALL churn('rot_q', 5, 1000, 'ring$i'); CALL churn('rot_cq', 5, 1000, 'classic$i');});
	wait_for(qq{SELECT generations() > $g}, "1: the time manager switched the ring ($i)");
}
is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT payload) FROM got WHERE payload LIKE 'ring_-%'}),
	'30000|30000', '1: every ring message taken once');
is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT payload) FROM got WHERE payload LIKE 'classic_-%'}),
	'30000|30000', '1: every classic message taken once');
$node->safe_psql('postgres', q{VACUUM rot_classic});
my $classic = $node->safe_psql('postgres', q{SELECT pg_relation_size('rot_classic')});
ok($classic > 5 * 1024 * 1024, "1: the held horizon keeps the classic table's consumed messages ($classic bytes)");
cmp_ok($node->safe_psql('postgres', q{SELECT generations()}), '>=', 6, '1: the ring came round twice: its segments were truncated');
wait_for(q{SELECT ring_bytes() <= 2 * 400 * 1024}, '1: and it ends small, horizon or not');
cmp_ok($node->safe_psql('postgres', q{SELECT truncated FROM aq.queue_monitor WHERE database = 'postgres'}), '>=', 4,
	'1: aq.queue_monitor counts the truncations');
note '1: ring ' . $node->safe_psql('postgres', q{SELECT ring_bytes()}) . " bytes, classic $classic bytes";
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_xid IS NOT NULL
	AND state = 'idle in transaction' AND pid <> pg_backend_pid()}), '1', '1: the horizon was held throughout');

# ============================================================ 2. a message left behind is carried forward
# A queue of the same table that nobody reads holds one message.  When the ring comes round to its
# segment, the time manager carries it forward into the current segment (ring.hpp, C1), unchanged,
# truncates the segment and switches on: the ring keeps turning and stays small.
$node->safe_psql('postgres', q{SELECT aq.create_queue('rot_idle_q', 'rot_ring'); SELECT aq.start_queue('rot_idle_q');
	SELECT aq.enqueue('rot_idle_q', 'left behind'::text)});
my ($left_msgid, $left_in) = split /\|/,
	$node->safe_psql('postgres', q{SELECT msgid, tableoid::regclass FROM rot_ring WHERE user_data = 'left behind'});
my $gen2 = $node->safe_psql('postgres', q{SELECT generations()});
for my $i (1 .. 5)
{
	my $g = $node->safe_psql('postgres', q{SELECT generations()});
	$node->safe_psql('postgres', qq{CALL churn('rot_q', 5, 1000, 'ring2$i')});
	wait_for(qq{SELECT generations() > $g}, "2: the ring comes round, past the message's segment ($i)");
}
cmp_ok($node->safe_psql('postgres', q{SELECT generations()}), '>=', $gen2 + 5, '2: the ring came round past it');
isnt($node->safe_psql('postgres', q{SELECT tableoid::regclass FROM rot_ring WHERE user_data = 'left behind'}), $left_in,
	'2: the message was carried out of its segment');
cmp_ok($node->safe_psql('postgres', q{SELECT carried FROM aq.queue_monitor WHERE database = 'postgres'}), '>=', 1,
	'2: aq.queue_monitor counts the messages carried');
is($node->safe_psql('postgres', q{SELECT msgid || ':' || payload FROM aq.dequeue('rot_idle_q', NULL::text, aq.dequeue_options(wait => 0))}),
	"$left_msgid:left behind", '2: it is there, once and unchanged, when its consumer comes');
is($node->safe_psql('postgres', q{SELECT count(*) FROM rot_ring WHERE q_id = (SELECT queue_id FROM aq.queues WHERE queue_name = 'rot_idle_q')}),
	'0', '2: and only once');
# (Until then the segment it was last carried into, sealed, keeps its consumed rows: a ring that
# is not written does not switch, so nothing carries it again.)
wait_for(q{SELECT ring_bytes() <= 2 * 400 * 1024}, '2: then the segments are truncated');

# ============================================================ 3. a REPEATABLE READ reader holds the segments
my $gen3 = $node->safe_psql('postgres', q{SELECT generations()});
my $reader = session($node, 'postgres');
query($reader, q{BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM rot_ring;});
$node->safe_psql('postgres', q{CALL churn('rot_q', 3, 1000, 'ring4')});
# The switch goes on (the next segment is empty), but the segment it leaves, all consumed, is
# locked by the reader: not truncated, round after round, and no round fails or waits on it.
wait_for(qq{SELECT generations() >= $gen3 + 1}, '3: the ring switches while the reader reads');
my $sealed_sql = q{SELECT sum(pg_relation_size(s.relid)) FROM aq.queue_segments s JOIN aq.queue_tables t USING (queue_table_id)
	WHERE t.queue_table = 'rot_ring' AND s.segment <> (SELECT segment FROM aq.segment_log l WHERE l.queue_table_id = t.queue_table_id
	ORDER BY generation DESC LIMIT 1)};
my $sealed = $node->safe_psql('postgres', $sealed_sql);
ok($sealed > 0, "3: the segment left holds its consumed messages ($sealed bytes)");
my ($rounds, $failures) = split /\|/, $node->safe_psql('postgres', q{SELECT rounds, failures FROM aq.queue_monitor WHERE database = 'postgres'});
wait_for(qq{SELECT rounds >= $rounds + 3 FROM aq.queue_monitor WHERE database = 'postgres'}, '3: the time manager goes on rotating');
is($node->safe_psql('postgres', $sealed_sql), $sealed, '3: nothing the reader locked is truncated');
cmp_ok($node->safe_psql('postgres', q{SELECT rotation_skips FROM aq.queue_monitor WHERE database = 'postgres'}), '>=', 1,
	'3: aq.queue_monitor counts the truncations put off');
is($node->safe_psql('postgres', q{SELECT failures FROM aq.queue_monitor WHERE database = 'postgres'}), $failures,
	'3: no round failed or waited on it');
query($reader, q{COMMIT;});
finish($reader);
wait_for(q{SELECT ring_bytes() <= 2 * 400 * 1024}, '3: once the reader is gone, the segments are truncated');

# ============================================================ 4. kill -9 of the time manager
$node->safe_psql('postgres', q{TRUNCATE got});
$node->safe_psql('postgres', q{SELECT aq.enqueue_array('rot_q', (SELECT array_agg('keep-' || i) FROM generate_series(1, 3000) i))});
my ($churn_out, $churn_err) = ('', '');
my $churn = IPC::Run::start([ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c', q{CALL churn('rot_q', 60, 500, 'crash')} ],
	'>', \$churn_out, '2>', \$churn_err);
wait_for(q{SELECT pid IS NOT NULL FROM aq.queue_monitor WHERE database = 'postgres'}, '4: the time manager runs');
my $gen4 = $node->safe_psql('postgres', q{SELECT generations()});
wait_for(qq{SELECT generations() > $gen4}, '4: it is rotating');
my $pid = $node->safe_psql('postgres', q{SELECT pid FROM aq.queue_monitor WHERE database = 'postgres'});
kill9_backend($node, $pid);
$churn->finish;    # its backend went with the crash restart
# What the churn committed before the crash, then everything left: each message once, none lost.
$node->safe_psql('postgres', q{INSERT INTO got SELECT payload FROM aq.dequeue_array('rot_q', NULL::text, 10000, aq.dequeue_options(wait => 0))});
is($node->safe_psql('postgres', q{SELECT count(*) FROM got WHERE payload LIKE 'keep-%'}), '3000', '4: every message enqueued before the crash is taken');
is($node->safe_psql('postgres', q{SELECT count(*) - count(DISTINCT payload) FROM got}), '0', '4: none twice');
is($node->safe_psql('postgres', q{SELECT count(*) FROM rot_ring}), '0', '4: none left');
my $gen5 = $node->safe_psql('postgres', q{SELECT generations()});
$node->safe_psql('postgres', q{CALL churn('rot_q', 5, 1000, 'after')});
wait_for(qq{SELECT generations() > $gen5}, '4: rotation goes on after the crash restart');
wait_for(q{SELECT ring_bytes() <= 2 * 400 * 1024}, '4: and truncates');

# ============================================================ 4b. an immediate shutdown mid-rotation
# The postmaster itself stops at once (no checkpoint: crash recovery at the next start) while the
# time manager rotates under a churn; after recovery nothing is lost or doubled and the ring goes on.
$node->safe_psql('postgres', q{SELECT aq.enqueue_array('rot_q', (SELECT array_agg('keep2-' || i) FROM generate_series(1, 3000) i))});
($churn_out, $churn_err) = ('', '');
$churn = IPC::Run::start([ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c', q{CALL churn('rot_q', 60, 500, 'stop')} ],
	'>', \$churn_out, '2>', \$churn_err);
my $gen4b = $node->safe_psql('postgres', q{SELECT generations()});
wait_for(qq{SELECT generations() > $gen4b}, '4b: the time manager is rotating');
$node->stop('immediate');
$churn->finish;    # its backend went with the server
$node->start;
finish($holder);    # the idle transaction went with the server (with part 4's crash restart already)
$holder = session($node, 'postgres');    # hold the horizon again
query($holder, q{BEGIN; SELECT txid_current();});
$node->safe_psql('postgres', q{INSERT INTO got SELECT payload FROM aq.dequeue_array('rot_q', NULL::text, 10000, aq.dequeue_options(wait => 0))});
is($node->safe_psql('postgres', q{SELECT count(*) FROM got WHERE payload LIKE 'keep2-%'}), '3000',
	'4b: every message enqueued before the immediate shutdown is taken');
is($node->safe_psql('postgres', q{SELECT count(*) - count(DISTINCT payload) FROM got}), '0', '4b: none twice');
is($node->safe_psql('postgres', q{SELECT count(*) FROM rot_ring}), '0', '4b: none left');
my $gen4c = $node->safe_psql('postgres', q{SELECT generations()});
$node->safe_psql('postgres', q{CALL churn('rot_q', 5, 1000, 'after2')});
wait_for(qq{SELECT generations() > $gen4c}, '4b: rotation goes on after recovery');
wait_for(q{SELECT ring_bytes() <= 2 * 400 * 1024}, '4b: and truncates');

# ============================================================ 5. a ring owned by a role with no other rights
# The time manager switches, carries forward and truncates as the queue table's owner (run_as), a
# role that may do no more than manage its own queue table: no round fails for want of a privilege.
$node->safe_psql('postgres', q{
CREATE ROLE rot_owner NOLOGIN;
GRANT EXECUTE ON FUNCTION aq.create_queue_table, aq.create_queue(text, text, integer, interval, interval, text, text),
      aq.start_queue TO rot_owner;
CREATE SCHEMA rot_app AUTHORIZATION rot_owner;
SET ROLE rot_owner;
SELECT aq.create_queue_table('own_ring', 'text', segments => 3, queue_table_schema => 'rot_app');
SELECT aq.create_queue('own_q', 'own_ring');
SELECT aq.start_queue('own_q');
SELECT aq.create_queue('own_idle_q', 'own_ring');
SELECT aq.start_queue('own_idle_q');
SELECT aq.enqueue('own_idle_q', 'kept'::text);
RESET ROLE;
CREATE FUNCTION own_generations() RETURNS bigint LANGUAGE sql AS $$
  SELECT max(generation) FROM aq.segment_log l JOIN aq.queue_tables t USING (queue_table_id) WHERE t.queue_table = 'own_ring' $$;
});
my ($failures5, $truncated5, $carried5) = split /\|/,
	$node->safe_psql('postgres', q{SELECT failures, truncated, carried FROM aq.queue_monitor WHERE database = 'postgres'});
my $gen6 = $node->safe_psql('postgres', q{SELECT own_generations()});
for my $i (1 .. 5)
{
	my $g = $node->safe_psql('postgres', q{SELECT own_generations()});
	$node->safe_psql('postgres', qq{CALL churn('own_q', 5, 1000, 'own$i')});
	wait_for(qq{SELECT own_generations() > $g}, "5: the owner's ring switches ($i)");
}
cmp_ok($node->safe_psql('postgres', q{SELECT own_generations()}), '>=', $gen6 + 5,
	"5: it came round past the kept message's segment: truncated and carried forward as its owner");
my ($failures6, $truncated6, $carried6) = split /\|/,
	$node->safe_psql('postgres', q{SELECT failures, truncated, carried FROM aq.queue_monitor WHERE database = 'postgres'});
is($failures6, $failures5, '5: no round failed');
cmp_ok($truncated6, '>', $truncated5, '5: segments truncated');
cmp_ok($carried6, '>', $carried5, '5: the kept message carried forward');
is($node->safe_psql('postgres', q{SELECT payload FROM aq.dequeue('own_idle_q', NULL::text, aq.dequeue_options(wait => 0))}),
	'kept', '5: and it is there once');

query($holder, q{ROLLBACK;});
finish($holder);
$node->stop;
done_testing();
