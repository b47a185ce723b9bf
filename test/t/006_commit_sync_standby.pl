# Commit modes with a synchronous standby (synchronous_standby_names = the standby, whose
# sync_state is 'sync'):
#   - WAIT with aq.commit_wait_level = remote_apply: the row is visible on the standby as
#     soon as the commit returns.  The standby applies commits 3 s late
#     (recovery_min_apply_delay), so this cannot happen by chance: a plain commit
#     (synchronous_commit = on) is not yet visible there when it returns, and the
#     remote_apply commit takes the 3 s.
#   - the standby stopped: a WAIT commit blocks in SyncRep; pg_cancel_backend() ends the
#     wait with PostgreSQL's WARNING (already committed locally), and the row is there.
#   - the standby stopped: NOWAIT (SET aq.commit_wait = nowait, and a procedure's
#     CALL aq.commit('WRITE BATCH NOWAIT')) returns at once, without a warning, and
#     aq.last_commit() says nowait / synchronous_commit off.  (A client-side timeout
#     guards these: statement_timeout does not cover the commit's wait for the standby —
#     PostgreSQL disables it before committing.)
#   - the standby stopped: WAIT with aq.commit_wait_level = local returns at once when
#     synchronous_commit is off (aq's WAIT wins at the same level: a local flush,
#     last_commit().synchronous_commit = local), and when synchronous_commit is left at
#     its default; with synchronous_commit explicitly set to on it still waits for the
#     standby (WAIT never weakens a synchronous_commit that was set).
#   - FORCE_WAIT set with ALTER SYSTEM: a session's SET synchronous_commit = off and
#     SET aq.commit_wait = nowait do not escape it: its commit blocks in SyncRep.
#   - the standby restarted catches up: it has every row the primary has.
use strict;
use warnings;

use Time::HiRes qw(time);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'aq'\n");
$primary->start;
$primary->safe_psql('postgres', q{
CREATE EXTENSION aq;
CREATE TABLE t (id int PRIMARY KEY, note text NOT NULL);
CREATE PROCEDURE insert_and_commit(i int, mode text) LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO t VALUES (i, 'procedure: ' || mode);
	CALL aq.commit(mode);
END $$;
});
$primary->backup('backup');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'backup', has_streaming => 1);
$standby->append_conf('postgresql.conf', "recovery_min_apply_delay = '3s'\n");
$standby->start;

my $standby_name = $standby->name;
$primary->append_conf('postgresql.conf', "synchronous_standby_names = '$standby_name'\n");
$primary->reload;
ok($primary->poll_query_until('postgres',
		"SELECT sync_state FROM pg_stat_replication WHERE application_name = '$standby_name'", 'sync'),
	"the standby ($standby_name) is the synchronous standby (sync_state = sync)");

# Runs $sql on the primary (psql via stdin, statement by statement); returns exit code,
# stdout, stderr and the seconds it took.  psql is given 10 s: if it has not finished by
# then (a commit waiting for the stopped standby), it is killed, the waiting backend is
# cancelled, and the exit code is 'timed out'.
sub timed_psql
{
	my ($sql) = @_;
	my $timed_out;
	my $t0 = time;
	my ($rc, $out, $err) = $primary->psql('postgres', $sql, timeout => 10, timed_out => \$timed_out);
	my $secs = time - $t0;
	if ($timed_out)
	{
		$primary->safe_psql('postgres',
			"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'");
		$rc = 'timed out';
	}
	return ($rc, $out, $err, $secs);
}

# Starts psql on the primary in the background with one -c per statement.
sub start_psql
{
	my (@statements) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-d', $primary->connstr('postgres'),
		  map { ('-c', $_) } @statements ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(300));
	return ($h, \$out, \$err);
}

# Asserts that the backend running $query waits for the synchronous standby, then cancels it.
sub wait_in_syncrep_and_cancel
{
	my ($query, $what) = @_;
	(my $quoted = $query) =~ s/'/''/g;
	ok($primary->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query = '$quoted'"),
		"$what: the commit waits for the standby (wait_event SyncRep)");
	is($primary->safe_psql('postgres',
			"SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity"
			  . " WHERE wait_event = 'SyncRep' AND query = '$quoted'"),
		'1', "$what: pg_cancel_backend() sent");
}

sub row_count
{
	my ($node, $id) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM t WHERE id = $id");
}

# 1. remote_apply: visible on the standby when the commit returns.
my ($rc, $out, $err, $secs) = timed_psql("INSERT INTO t VALUES (1, 'synchronous_commit = on')");
is($rc, 0, 'control: a plain commit (synchronous_commit = on) succeeds');
is(row_count($standby, 1), '0',
	'control: ... and is not yet visible on the standby when it returns (apply is 3 s late)');

($rc, $out, $err, $secs) = timed_psql(q{
SET aq.commit_wait_level = 'remote_apply';
SET aq.commit_wait = 'wait';
INSERT INTO t VALUES (2, 'remote_apply');
SELECT commit_wait, synchronous_commit, durable_on_return FROM aq.last_commit();
});
is($rc . $out, "0wait|remote_apply|t", 'remote_apply WAIT commit: last_commit() says wait / remote_apply');
is(row_count($standby, 2), '1', 'remote_apply WAIT commit: the row is visible on the standby as soon as the commit returned');
cmp_ok($secs, '>=', 2, sprintf('remote_apply WAIT commit: it waited for the delayed apply (%.1f s)', $secs));

# 2. The standby stopped: a WAIT commit blocks until cancelled.
$standby->stop;
my $insert = "INSERT INTO t VALUES (10, 'wait, cancelled')";
my ($h, $hout, $herr) = start_psql("SET aq.commit_write = 'immediate,wait'", $insert,
	'SELECT commit_wait, synchronous_commit FROM aq.last_commit()');
wait_in_syncrep_and_cancel($insert, 'WAIT without the standby');
$h->finish;
my $committed_locally = quotemeta("WARNING:  canceling wait for synchronous replication due to user request\n"
	  . "DETAIL:  The transaction has already committed locally, but might not have been replicated to the standby.");
like($$herr, qr/$committed_locally/,
	'WAIT without the standby: the client gets the warning that the transaction committed locally');
is($$hout, "SET\nINSERT 0 1\nwait|on\n", 'WAIT without the standby: the INSERT reports success; last_commit() says wait / on');
is(row_count($primary, 10), '1', 'WAIT without the standby: the row is in the table on the primary');

# 3. NOWAIT returns without the standby (a commit that waited would time out).
($rc, $out, $err, $secs) = timed_psql(q{
SET aq.commit_wait = 'nowait';
INSERT INTO t VALUES (20, 'nowait');
SELECT commit_wait, commit_logging, synchronous_commit FROM aq.last_commit();
});
is($rc, 0, 'SET aq.commit_wait = nowait: the commit succeeds without the standby');
is($err, '', 'SET aq.commit_wait = nowait: no warning (it did not wait)');
is($out, 'nowait|immediate|off', 'SET aq.commit_wait = nowait: last_commit() says nowait / off');
cmp_ok($secs, '<', 5, sprintf('SET aq.commit_wait = nowait: it returned promptly (%.2f s)', $secs));

($rc, $out, $err, $secs) = timed_psql(q{
CALL insert_and_commit(21, 'WRITE BATCH NOWAIT');
SELECT commit_wait, commit_logging, synchronous_commit FROM aq.last_commit();
});
is($rc, 0, "CALL aq.commit('WRITE BATCH NOWAIT') in a procedure: succeeds without the standby");
is($err, '', "CALL aq.commit('WRITE BATCH NOWAIT'): no warning (it did not wait)");
is($out, 'nowait|batch|off', "CALL aq.commit('WRITE BATCH NOWAIT'): last_commit() says nowait / batch / off");
cmp_ok($secs, '<', 5, sprintf("CALL aq.commit('WRITE BATCH NOWAIT'): it returned promptly (%.2f s)", $secs));
is(row_count($primary, 20) + row_count($primary, 21), 2, 'the NOWAIT rows are in the table on the primary');

# 4. aq.commit_wait_level = local.
($rc, $out, $err, $secs) = timed_psql(q{
SET synchronous_commit = off;
SET aq.commit_wait_level = 'local';
SET aq.commit_wait = 'wait';
SELECT commit_wait, synchronous_commit FROM aq.commit_mode();
INSERT INTO t VALUES (30, 'wait, level local');
SELECT commit_wait, synchronous_commit, durable_on_return FROM aq.last_commit();
});
is($rc, 0, 'WAIT, commit_wait_level local (synchronous_commit off): succeeds without the standby');
is($err, '', 'WAIT, commit_wait_level local: no warning (it did not wait for the standby)');
is($out, "wait|local\nwait|local|t",
	'WAIT, commit_wait_level local: commit_mode() and last_commit() say wait / local, flushed on return');
cmp_ok($secs, '<', 5, sprintf('WAIT, commit_wait_level local: it returned promptly (%.2f s)', $secs));

# synchronous_commit only at its default: aq.commit_wait_level alone says what WAIT means.
($rc, $out, $err, $secs) = timed_psql(q{
SET aq.commit_wait_level = 'local';
SET aq.commit_wait = 'wait';
INSERT INTO t VALUES (32, 'wait, level local, synchronous_commit at its default');
SELECT commit_wait, synchronous_commit, durable_on_return FROM aq.last_commit();
});
is($rc, 0, 'WAIT, commit_wait_level local (synchronous_commit at its default): succeeds without the standby');
is($out, "wait|local|t", 'WAIT, commit_wait_level local, default synchronous_commit: last_commit() says wait / local');
cmp_ok($secs, '<', 5, sprintf('WAIT, commit_wait_level local, default synchronous_commit: returned promptly (%.2f s)', $secs));

# synchronous_commit explicitly 'on': stronger than 'local', and WAIT never weakens what was set.
$insert = "INSERT INTO t VALUES (31, 'wait, level local, synchronous_commit on')";
($h, $hout, $herr) = start_psql("SET synchronous_commit = on", "SET aq.commit_wait_level = 'local'",
	"SET aq.commit_wait = 'wait'", $insert, 'SELECT commit_wait, synchronous_commit FROM aq.last_commit()');
wait_in_syncrep_and_cancel($insert, 'WAIT, commit_wait_level local, synchronous_commit on');
$h->finish;
like($$herr, qr/WARNING:  canceling wait for synchronous replication due to user request/,
	'WAIT, commit_wait_level local, synchronous_commit on: the cancelled wait reports the warning');
is($$hout, "SET\nSET\nSET\nINSERT 0 1\nwait|on\n",
	'WAIT, commit_wait_level local, synchronous_commit set to on: last_commit() says wait / on');

# 5. FORCE_WAIT at the system level beats a session's synchronous_commit = off and nowait.
$primary->safe_psql('postgres',
	"ALTER SYSTEM SET aq.commit_wait = 'force_wait'; SELECT pg_reload_conf();");
ok($primary->poll_query_until('postgres', 'SELECT forced FROM aq.commit_mode()'),
	'ALTER SYSTEM SET aq.commit_wait = force_wait is in force in new sessions');
$insert = "INSERT INTO t VALUES (40, 'force_wait')";
($h, $hout, $herr) = start_psql('SET synchronous_commit = off', 'SET aq.commit_wait = nowait', $insert,
	'SELECT commit_wait, synchronous_commit FROM aq.last_commit()');
wait_in_syncrep_and_cancel($insert, 'FORCE_WAIT against synchronous_commit = off and nowait');
$h->finish;
like($$herr, qr/WARNING:  canceling wait for synchronous replication due to user request/,
	'FORCE_WAIT: the cancelled wait reports the warning');
is($$hout, "SET\nSET\nINSERT 0 1\nforce_wait|on\n", 'FORCE_WAIT: last_commit() says force_wait / on');
is(row_count($primary, 40), '1', 'FORCE_WAIT: the row is in the table on the primary');

$primary->safe_psql('postgres', 'ALTER SYSTEM RESET aq.commit_wait; SELECT pg_reload_conf();');
ok($primary->poll_query_until('postgres', 'SELECT forced FROM aq.commit_mode()', 'f'),
	'ALTER SYSTEM RESET aq.commit_wait: FORCE_WAIT is gone');
($rc, $out, $err) = timed_psql(q{
SET synchronous_commit = off;
INSERT INTO t VALUES (41, 'synchronous_commit = off after the reset');
});
ok($rc == 0 && $err eq '', 'after the reset, synchronous_commit = off commits without the standby again')
  or diag($err);

# 6. The standby comes back and catches up.
$standby->adjust_conf('postgresql.conf', 'recovery_min_apply_delay', undef);
$standby->start;
# Up to the insert position: row 41 was committed with synchronous_commit = off, so its record
# may not have been written yet, and the default target (the write position) can precede it.
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
ok($primary->poll_query_until('postgres',
		"SELECT sync_state FROM pg_stat_replication WHERE application_name = '$standby_name'", 'sync'),
	'the restarted standby is synchronous again');
my $rows = "SELECT string_agg(id::text, ',' ORDER BY id) FROM t";
is($standby->safe_psql('postgres', $rows), $primary->safe_psql('postgres', $rows),
	'the standby has every row of the primary');
is($primary->safe_psql('postgres', $rows), '1,2,10,20,21,30,31,32,40,41', 'the primary has every row that was committed');

$standby->stop;
$primary->stop;
for my $node ($primary, $standby)
{
	unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC|TRAP:/,
		$node->name . ': the server log shows no crash');
}
done_testing();
