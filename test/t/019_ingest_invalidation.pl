# Fast ingest under invalidation storms and every end of a transaction: the server never restarts.
#
# hardening A2: the planner hook's cache of enabled tables was destroyed by the relcache
# invalidation callback while is_enabled() was between its lookup (which opens catalogs, and so
# accepts invalidations) and its insert into that cache: the backend crashed, and the whole
# cluster restarted, during the first planning of an INSERT — hinted or not — in a new session.
# Invalidations of aq.fast_ingest_tables come from ANALYZE (autovacuum too), GRANT, ALTER; cache
# resets from DDL churn.  Here, for a bounded time:
#   - one client GRANTs on and ANALYZEs aq.fast_ingest_tables in a loop, two create and drop
#     tables in a loop (invalidation traffic);
#   - writers open a new session per transaction (pgbench -C) and run a hinted INSERT, a plain
#     INSERT (planned through the same hook) and DISCARD ALL;
#   - hardening A1, under the same load: sessions that keep their connection run savepoint,
#     PREPARE TRANSACTION, ROLLBACK PREPARED / COMMIT PREPARED and hinted-insert combinations
#     (a prepared transaction's leftover writer state crashed the session's next commit).
# A session terminated with hinted rows in its open transaction leaves nothing applied or counted.
# Then: pg_postmaster_start_time() has not changed, the log has no "terminated by signal", every
# client finished without error, and exactly the committed hinted rows were applied.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $seconds = 8;

my $node = PostgreSQL::Test::Cluster->new('ingest_invalidation');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
max_prepared_transactions = 10
max_connections = 40
restart_after_crash = on
autovacuum_naptime = 1
log_min_messages = warning
));
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
CREATE TABLE fi (client int NOT NULL, kind text NOT NULL);
SELECT aq.enable_fast_ingest('fi');
CREATE TABLE plain (client int);
});
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my $log_start = -s $node->logfile;

my $dir = PostgreSQL::Test::Utils::tempdir;
sub script
{
	my ($name, $text) = @_;
	my $path = "$dir/$name.sql";
	open my $fh, '>', $path or die "cannot write $path: $!";
	print $fh $text;
	close $fh;
	return $path;
}

my $registry = script('registry', q{
GRANT SELECT ON aq.fast_ingest_tables TO PUBLIC;
ANALYZE aq.fast_ingest_tables;
REVOKE SELECT ON aq.fast_ingest_tables FROM PUBLIC;
GRANT SELECT ON aq.fast_ingest_tables TO PUBLIC;
});
my $churn = script('churn', q{
CREATE TABLE churn_:client_id (i int);
DROP TABLE churn_:client_id;
});
my $new_sessions = script('new_sessions', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO fi VALUES (:client_id, 'new session');
INSERT INTO plain VALUES (:client_id);
DISCARD ALL;
});
# One committed hinted row per run, after a prepared (or refused) transaction in the same session.
my $combos = script('combos', q{
BEGIN;
SAVEPOINT s;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO fi VALUES (:client_id, 'rolled back');
ROLLBACK TO SAVEPOINT s;
PREPARE TRANSACTION 'inval_a_:client_id';
BEGIN;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO fi SELECT :client_id, 'rolled back' FROM generate_series(1, 50);
SAVEPOINT t;
INSERT INTO plain VALUES (:client_id);
ROLLBACK;
ROLLBACK PREPARED 'inval_a_:client_id';
BEGIN;
SAVEPOINT u;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO fi VALUES (:client_id, 'rolled back');
ROLLBACK TO SAVEPOINT u;
SAVEPOINT v;
RELEASE SAVEPOINT v;
PREPARE TRANSACTION 'inval_b_:client_id';
COMMIT PREPARED 'inval_b_:client_id';
BEGIN;
SAVEPOINT w;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO fi VALUES (:client_id, 'committed');
RELEASE SAVEPOINT w;
COMMIT;
});

sub pgbench
{
	my ($script, $clients, @extra) = @_;
	my ($out, $err) = ('', '');
	my @cmd = ('pgbench', '-n', '-h', $node->host, '-p', $node->port, '-T', $seconds, '-c', $clients,
		'-f', $script, @extra, 'postgres');
	my $h = IPC::Run::start(\@cmd, '>', \$out, '2>', \$err);
	return { handle => $h, out => \$out, err => \$err, name => $script };
}

my @runs = (
	pgbench($registry, 1),
	pgbench($churn, 2),
	pgbench($new_sessions, 4, '-C'),
	pgbench($combos, 3),
);
my %processed;
for my $run (@runs)
{
	my $ok = $run->{handle}->finish;
	ok($ok, "pgbench $run->{name} finished without error") or diag(${ $run->{err} });
	my ($n) = ${ $run->{out} } =~ /number of transactions actually processed: (\d+)/;
	$processed{ $run->{name} } = $n // 0;
}
ok($processed{$new_sessions} > 0 && $processed{$combos} > 0, 'writers ran')
  or diag("new sessions $processed{$new_sessions}, combos $processed{$combos}");

# After a crash the server restarts (restart_after_crash): wait until it takes queries again.
$node->poll_query_until('postgres', 'SELECT true') or die 'the server does not accept queries';
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started, 'the server never restarted');
my $log = slurp_file($node->logfile, $log_start);
unlike($log, qr/terminated by signal/, 'no backend was terminated by a signal');

# A session ended (FATAL) in the middle of a transaction with hinted rows: its rows are never
# applied and it stays counted nowhere.
my ($in, $out, $err) = ('', '', '');
my $session = IPC::Run::start(['psql', '-X', '-q', '-A', '-t', '-d', $node->connstr('postgres')],
	'<', \$in, '>', \$out, '2>', \$err);
$in .= "BEGIN;\nINSERT /*+ MEMOPTIMIZE_WRITE */ INTO fi VALUES (-1, 'terminated');\nSELECT 'pid=' || pg_backend_pid();\n";
my $timer = IPC::Run::timer($PostgreSQL::Test::Utils::timeout_default);
$timer->start;
$session->pump until $out =~ /pid=(\d+)/ || $timer->is_expired;
my ($pid) = $out =~ /pid=(\d+)/;
ok(defined $pid, 'a session holds hinted rows in an open transaction');
is($node->safe_psql('postgres', 'SELECT writers FROM aq.memoptimize_write_area'), '1', 'it is counted as a writer');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
$session->finish;
$node->poll_query_until('postgres', 'SELECT writers = 0 FROM aq.memoptimize_write_area')
  or diag('a terminated session stayed counted as a writer');
is($node->safe_psql('postgres', 'SELECT writers FROM aq.memoptimize_write_area'), '0', 'the terminated session is counted no more');

$node->safe_psql('postgres', q{SELECT aq.writes_flush('60 s')});
is($node->safe_psql('postgres', q{SELECT count(*) FROM fi WHERE kind = 'new session'}),
	$processed{$new_sessions}, 'every row of a new session applied');
is($node->safe_psql('postgres', q{SELECT count(*) FROM fi WHERE kind = 'committed'}),
	$processed{$combos}, 'every committed row after a prepared transaction applied');
is($node->safe_psql('postgres', q{SELECT count(*) FROM fi WHERE kind IN ('rolled back', 'terminated')}),
	'0', 'no rolled-back row applied');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0', 'no prepared transaction left');
is($node->safe_psql('postgres', 'SELECT writers FROM aq.memoptimize_write_area'), '0', 'no writer left counted');

$node->stop;
done_testing();
