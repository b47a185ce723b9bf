
# Copyright: aq project.  PostgreSQL TAP test (PostgreSQL::Test::Cluster), for 15, 17 and 18.
#
# A wake-up must come after the waking transaction's locks are released (wakeup.hpp, xact_end.hpp:
# the unlocked events).  A consumer that took part of a transaction group holds the group's lock
# (an advisory lock) until its transaction ends; a dequeue waiting for the rest of the group
# sleeps.  When the consumer
#   1. commits: the rest of the group becomes takeable;
#   2. rolls back: the whole group does (its part returns);
#   3. rolls back to a savepoint taken before it dequeued: the whole group does, while its
#      transaction goes on.
# Each time the waiter must be woken and take what became takeable.  Before, the wake-up came at
# the commit (or abort) event, before PostgreSQL released the locks: a waiter that woke fast found
# the group still locked, slept again, and stayed asleep until something else woke it (here:
# it is not woken within 5 s; the rescan that would have found it is set to an hour).
#
# The race is a matter of microseconds, so each case is tried 12 times, and the consumer holds a
# lock on each of 1000 partitions and their 2000 indexes, which PostgreSQL releases before the
# advisory locks: that widens the window the wake-up fell in.  Before the fix, most runs of each
# case failed at least once in 12 tries; no try may fail.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use AqSession qw(session query finish);

my $tries = 12;

my $node = PostgreSQL::Test::Cluster->new('release_wakeup_race');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
max_locks_per_transaction = 256
aq.wait_rescan_interval = '1h'
));
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
SELECT aq.create_queue_table('rr_qt', 'text', message_grouping => 'transactional');
SELECT aq.create_queue('rr_q', 'rr_qt');
SELECT aq.start_queue('rr_q');
CREATE TABLE rr_parts (i int, j int, k int) PARTITION BY LIST (i);
CREATE INDEX ON rr_parts (j);
CREATE INDEX ON rr_parts (k);
DO $$ BEGIN
  FOR i IN 1 .. 1000 LOOP
    EXECUTE format('CREATE TABLE %I PARTITION OF rr_parts FOR VALUES IN (%s)', 'rr_part_' || i, i);
  END LOOP;
END $$;
});

# A dequeue of up to 10 messages that waits up to a minute; returns the running psql and its
# output: the messages, and whether it was woken within 5 s (a wake-up takes milliseconds).
sub start_waiter
{
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres'), '-c',
		  "SELECT string_agg(payload, ',' ORDER BY payload) || ' woken in time: ' "
		  . "|| (clock_timestamp() - statement_timestamp() < interval '5 s') "
		  . "FROM aq.dequeue_array('rr_q', NULL::text, 10, aq.dequeue_options(wait => '60 s'))" ],
		'>', \$out, '2>', \$err);
	return ($h, \$out, \$err);
}

sub wait_until_sleeping
{
	return $node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE wait_event_type = 'Extension' AND query LIKE '%aq.dequeue_array(''rr_q''%'});
}

# One try of a case: the consumer takes a1 of the group (a1, a2) in an open transaction, after
# `before` and then locks the partitions; a waiter sleeps; the consumer runs `end`; the waiter
# must return `expected`.  Returns '' or what went wrong.
sub try_once
{
	my ($consumer, $before, $end, $expected) = @_;
	$node->safe_psql('postgres', q{SELECT aq.enqueue_array('rr_q', ARRAY['a1', 'a2'])});
	query($consumer, 'BEGIN;');
	query($consumer, $before) if $before;
	my $took = query($consumer,
		q{SELECT string_agg(payload, ',') FROM aq.dequeue_array('rr_q', NULL::text, 1, aq.dequeue_options(wait => '0'));});
	return "the consumer took '$took', not a1" unless $took eq 'a1';
	query($consumer, 'SELECT count(*) FROM rr_parts;');
	my ($h, $out, $err) = start_waiter();
	return 'the waiter never slept' unless wait_until_sleeping();
	query($consumer, $end);
	$h->finish;
	query($consumer, 'COMMIT;') if $before;    # the savepoint case's transaction goes on
	# Whatever is left (after a failure) goes, so the next try starts from an empty queue.
	# (An empty queue is QA228, which is expected.)
	$node->psql('postgres',
		q{SELECT count(*) FROM aq.dequeue_array('rr_q', NULL::text, 10, aq.dequeue_options(wait => '0'))});
	return "the waiter returned '$$out' (error: '$$err'), not '$expected woken in time: true'"
	  unless $$out eq "$expected woken in time: true\n";
	return '';
}

my $consumer = session($node, 'postgres');
for my $case (
	[ 'commit of a part of a group wakes the waiter, which takes the rest', undef, 'COMMIT;', 'a2' ],
	[ 'rollback of a part of a group wakes the waiter, which takes the whole group', undef, 'ROLLBACK;', 'a1,a2' ],
	[ 'rollback to a savepoint wakes the waiter, which takes the whole group',
	  'SAVEPOINT before_dequeue;', 'ROLLBACK TO SAVEPOINT before_dequeue;', 'a1,a2' ])
{
	my ($name, $before, $end, $expected) = @$case;
	my @failures;
	for my $try (1 .. $tries)
	{
		my $failure = try_once($consumer, $before, $end, $expected);
		push @failures, "try $try: $failure" if $failure ne '';
	}
	is(join('; ', @failures), '', "$name, in each of $tries tries");
}
finish($consumer);

$node->stop;
done_testing();
