# Copyright: aq project.  PostgreSQL 15 TAP test (PostgreSQL::Test::Cluster).
#
# A ring queue table (src/queue/ring.hpp) against every kind of holder of the xmin horizon, all at
# once: a session idle in a transaction with an xid, a prepared transaction left open, and a hot
# standby with hot_standby_feedback through a replication slot, holding a REPEATABLE READ snapshot
# there (then, the standby stopped, the slot alone).  What is consumed is reclaimed by truncation
# whatever holds the horizon:
#   1. With all of them holding, 30,000 messages go through the ring: the time manager comes round
#      the ring twice (each segment truncated before it is written again), the ring ends small, and
#      every message is taken once.
#   2. A browse that waits on the standby, while the primary's rotations truncate segments and
#      their truncations are replayed, holds no segment there: replay never waits for it (no
#      recovery conflict), and it gets the message the primary enqueues during its wait.
#   3. The standby stopped, its slot still holds the horizon: the ring goes on turning.
#
# No fixed sleeps: poll_query_until.
use strict;
use warnings;

use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib $FindBin::Bin;
use AqSession qw(session query finish);

my $primary = PostgreSQL::Test::Cluster->new('holders_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
max_prepared_transactions = 5
log_min_messages = warning
aq.segment_size = '256kB'
aq.segment_max_age = '1s'
));
$primary->start;
$primary->safe_psql('postgres', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('rh_ring', 'text', segments => 3);
SELECT aq.create_queue('rh_q', 'rh_ring');
SELECT aq.start_queue('rh_q');
CREATE TABLE got (payload text);
CREATE TABLE other (x integer);
INSERT INTO other VALUES (1);
CREATE PROCEDURE churn(rounds integer, n integer, tag text) LANGUAGE plpgsql AS $$
BEGIN
  FOR r IN 1 .. rounds LOOP
    PERFORM aq.enqueue_array('rh_q', (SELECT array_agg(format('%s-%s-%s-%s', tag, r, i, repeat('x', 150))) FROM generate_series(1, n) i));
    COMMIT;
    INSERT INTO got SELECT payload FROM aq.dequeue_array('rh_q', NULL::text, n, aq.dequeue_options(wait => 0));
    COMMIT;
  END LOOP;
END $$;
CREATE FUNCTION ring_bytes() RETURNS bigint LANGUAGE sql AS $$
  SELECT sum(pg_relation_size(s.relid))::bigint FROM aq.queue_segments s JOIN aq.queue_tables t USING (queue_table_id)
   WHERE t.queue_table = 'rh_ring' $$;
CREATE FUNCTION generations() RETURNS bigint LANGUAGE sql AS $$
  SELECT max(generation) FROM aq.segment_log l JOIN aq.queue_tables t USING (queue_table_id) WHERE t.queue_table = 'rh_ring' $$;
SELECT pg_create_physical_replication_slot('rh_slot');
});
$primary->backup('backup');
my $standby = PostgreSQL::Test::Cluster->new('holders_standby');
$standby->init_from_backup($primary, 'backup', has_streaming => 1);
$standby->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
primary_slot_name = 'rh_slot'
hot_standby_feedback = on
wal_receiver_status_interval = 1s
max_standby_streaming_delay = 1s
));
$standby->start;
$primary->wait_for_catchup($standby);

sub wait_for
{
	my ($query, $name) = @_;
	ok($primary->poll_query_until('postgres', $query), $name);
}

# Goes through the ring, 5,000 messages at a time, until the time manager has switched it $turns
# times (with 3 segments, 6 switches write each segment again twice: each was truncated first).
sub turn
{
	my ($turns, $tag) = @_;
	for my $i (1 .. $turns)
	{
		my $g = $primary->safe_psql('postgres', q{SELECT generations()});
		$primary->safe_psql('postgres', qq{CALL churn(5, 1000, '$tag$i')});
		wait_for(qq{SELECT generations() > $g}, "$tag: the time manager switched the ring ($i)");
	}
}

# ============================================================ the holders
my $idle = session($primary, 'postgres');
my $held_xid = query($idle, q{BEGIN; SELECT txid_current();});
$primary->safe_psql('postgres', q{BEGIN; CREATE TABLE in_prepared (x integer); PREPARE TRANSACTION 'rh_prepared';});
my $reader = session($standby, 'postgres');
query($reader, q{BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM other;});
wait_for(qq{SELECT xmin IS NOT NULL AND xmin::text::bigint <= $held_xid FROM pg_replication_slots WHERE slot_name = 'rh_slot'},
	"the standby's snapshot holds the slot's xmin");

# ============================================================ 1. all of them holding
turn(6, 'held');
is($primary->safe_psql('postgres', q{SELECT count(*), count(DISTINCT payload) FROM got}), '30000|30000',
	'1: every message taken once');
wait_for(q{SELECT ring_bytes() <= 2 * 400 * 1024}, '1: the ring ends small, every holder holding');
is($primary->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts}), '1', '1: the prepared transaction held throughout');
is($primary->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_xid IS NOT NULL
	AND state = 'idle in transaction' AND pid <> pg_backend_pid()}), '1', '1: so did the idle session');
is($primary->safe_psql('postgres',
	qq{SELECT xmin::text::bigint <= $held_xid FROM pg_replication_slots WHERE slot_name = 'rh_slot'}),
	't', "1: and the standby's slot");

# ============================================================ 2. a waiting browse on the standby
$primary->wait_for_catchup($standby);
my $conflicts = $standby->safe_psql('postgres', q{SELECT confl_lock FROM pg_stat_database_conflicts WHERE datname = 'postgres'});
my $browser = session($standby, 'postgres');
query($browser, q{SET application_name = 'rh_browser';});
# (By correlation: the churn's own messages, seen in passing, are not what it waits for.)
$browser->{out} = $browser->{err} = '';
$browser->{in} .= q{SELECT payload FROM aq.dequeue('rh_q', NULL::text,
	aq.dequeue_options(dequeue_mode => 'browse', wait => '120', correlation => 'for the standby'));} . "\n";
$browser->{h}->pump_nb while length $browser->{in};
ok($standby->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE application_name = 'rh_browser' AND state = 'active' AND wait_event_type = 'Extension'}),
	'2: the browse on the standby sleeps');
turn(3, 'browsed');
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{SELECT confl_lock FROM pg_stat_database_conflicts WHERE datname = 'postgres'}),
	$conflicts, '2: replaying the truncations never waited for the sleeping browse');
$primary->safe_psql('postgres',
	q{SELECT aq.enqueue('rh_q', 'seen on the standby'::text, aq.message_properties(correlation => 'for the standby'))});
$browser->{h}->pump until $browser->{out} =~ /\n/ || $browser->{err} =~ /ERROR/;
like($browser->{out}, qr/seen on the standby/, '2: and it gets the message enqueued during its wait');
unlike($browser->{err}, qr/ERROR|FATAL/, '2: with no error (no recovery conflict cancelled it)');
finish($browser);
$primary->safe_psql('postgres', q{INSERT INTO got SELECT payload FROM aq.dequeue_array('rh_q', NULL::text, 10, aq.dequeue_options(wait => 0))});

# ============================================================ 3. the slot alone
query($reader, q{COMMIT;});
finish($reader);
$standby->stop;
my $slot_xmin = $primary->safe_psql('postgres', q{SELECT xmin FROM pg_replication_slots WHERE slot_name = 'rh_slot'});
ok($slot_xmin ne '', "3: the stopped standby's slot keeps its xmin ($slot_xmin)");
query($idle, q{ROLLBACK;});
finish($idle);
$primary->safe_psql('postgres', q{ROLLBACK PREPARED 'rh_prepared'});
turn(3, 'slot');
wait_for(q{SELECT ring_bytes() <= 2 * 400 * 1024}, '3: the ring still ends small');
is($primary->safe_psql('postgres', q{SELECT xmin FROM pg_replication_slots WHERE slot_name = 'rh_slot'}), $slot_xmin,
	'3: the slot held the horizon throughout');
is($primary->safe_psql('postgres', q{SELECT count(*) - count(DISTINCT payload) FROM got}), '0', 'no message taken twice');
is($primary->safe_psql('postgres', q{SELECT count(*) FROM rh_ring}), '0', 'none left');

$primary->safe_psql('postgres', q{SELECT pg_drop_replication_slot('rh_slot')});
$primary->stop;
done_testing();
