# Fast ingest (MEMOPTIMIZE_WRITE): a database slot whose records are reserved but not yet
# committed is not idle (hardening 16c: with more than 64 fast-ingest databases, such a slot was
# handed to another database; the rows were never drained, the ring tail stuck and write_end()
# returned early).
#
# 64 databases (the ring's slot count) each drain a row, so every slot is taken, and their drain
# workers exit.  Then, in db1 (the first slot), a transaction's commit is held between the
# moment its fast-ingest rows are reserved in the ring and the moment they are published: it
# also writes an ordinary row and waits for a synchronous standby that does not exist.  A 65th
# database commits fast-ingest rows meanwhile: it must get another idle slot, not db1's.  Then
# the standby requirement is dropped: db1's commit completes, and its rows must be applied.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $ndb = 64;
my $node = PostgreSQL::Test::Cluster->new('ingest_slot_reuse');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
autovacuum = off
fsync = off
max_worker_processes = 24
max_connections = 40
max_wal_senders = 2
wal_level = replica
));
$node->start;

$node->safe_psql('template1', q{
CREATE EXTENSION aq;
CREATE TABLE ft (id int PRIMARY KEY, note text);
CREATE TABLE plain_t (id int);
SELECT aq.enable_fast_ingest('ft');
});
$node->safe_psql('postgres', "CREATE DATABASE db$_") for 1 .. $ndb + 1;

for my $i (1 .. $ndb)
{
	$node->safe_psql("db$i", qq{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ft VALUES (1, 'first');
SELECT aq.write_end('60 s');
});
}
is($node->safe_psql('db1', 'SELECT count(*) FROM ft'), '1', "each of the $ndb databases drained a row");
$node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'aq fast ingest drain'")
  or die 'the idle drain workers did not exit';

# Hold db1's commit after its fast-ingest rows are reserved.
$node->safe_psql('postgres', "ALTER SYSTEM SET synchronous_standby_names = 'nobody'; SELECT pg_reload_conf()");
$node->poll_query_until('postgres', "SELECT setting = 'nobody' FROM pg_settings WHERE name = 'synchronous_standby_names'")
  or die 'synchronous_standby_names did not take effect';
# The checkpointer publishes the new synchronous_standby_names a moment after the reload: a
# commit that came first did not wait (its rows are simply applied); then try again.
my ($held, $held_out, $held_err, $held_lo);
for my $try (1 .. 20)
{
	($held_out, $held_err) = ('', '');
	$held_lo = 1000 * $try;
	my $held_hi = $held_lo + 49;
	$held = IPC::Run::start(
		[ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('db1'), '-c',
		  "BEGIN; INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ft SELECT g, 'held' FROM generate_series($held_lo, $held_hi) g;"
		  . ' INSERT INTO plain_t VALUES (1); COMMIT;' ],
		'>', \$held_out, '2>', \$held_err);
	my $waiting = 0;
	while ($held->pumpable)
	{
		$waiting = $node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE datname = 'db1' AND wait_event = 'SyncRep'");
		last if $waiting;
		$held->pump_nb;
	}
	last if $waiting;
	$held->finish;
	$node->safe_psql('db1', "SELECT aq.write_end('30 s')");
	$node->safe_psql('db1', "DELETE FROM ft WHERE note = 'held'");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'aq fast ingest drain'")
	  or die 'the idle drain workers did not exit';
}
ok($held->pumpable, 'db1: a commit waits between reserving its fast-ingest rows and publishing them');
is($node->safe_psql('db1', 'SELECT rows_buffered FROM aq.memoptimize_write_area'), '50',
	'the held commit\'s 50 rows are reserved in the ring');

# A 65th database takes a slot meanwhile (its transaction writes no WAL: no standby wait).
my $other = $ndb + 1;
my ($rc, $out, $err) = $node->psql("db$other", q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ft SELECT g, 'other' FROM generate_series(1, 10) g;
SELECT aq.get_write_hwm_seqid() IS NOT NULL;
}, on_error_stop => 1);
is($rc . $err, '0', "db$other committed fast-ingest rows (it took an idle slot)") or diag($err);

# Release db1's commit.
$node->safe_psql('postgres', 'ALTER SYSTEM RESET synchronous_standby_names; SELECT pg_reload_conf()');
$held->finish;
is($held->result(0) . $held_err, '0', 'db1: the held commit completed') or diag($held_err);
($rc, $out, $err) = $node->psql('db1', "SELECT aq.writes_flush('20 s')", on_error_stop => 1);
is($rc . $err, '0', 'writes_flush returns') or diag($err);
is($node->safe_psql('db1', "SELECT count(*) FROM ft WHERE note = 'held'"), '50',
	'db1: the rows of the held commit were applied (its slot was not given away)');
is($node->safe_psql("db$other", 'SELECT count(*) FROM ft'), '10', "db$other: its rows were applied");
is($node->safe_psql('db1', 'SELECT rows_buffered || \'/\' || used_bytes FROM aq.memoptimize_write_area'),
	'0/0', 'the ring is empty: its tail did not stick');

unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC|TRAP:/, 'no process crashed');
$node->stop;
done_testing();
