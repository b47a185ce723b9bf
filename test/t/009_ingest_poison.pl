# Fast ingest (MEMOPTIMIZE_WRITE): rows the drain cannot apply ("poison" rows).
#
# The drain delay is raised first (ALTER SYSTEM aq.fast_ingest_drain_delay + reload) so
# that all the rows below reach the drain together, as one batch, and only then lowered
# again: the batch fails, the drain retries row by row, applies the good rows and records
# the bad ones in aq.fast_ingest_rejects.
#   - p_t: PRIMARY KEY, CHECK (v >= 0), NOT NULL v.  Good rows; duplicates of rows already
#     in the table (23505); duplicates inside the batch (the first one wins, the later is
#     23505); CHECK violations (23514); NULL in the NOT NULL column (23502).
#   - trig_t: a BEFORE INSERT trigger changes the row, an AFTER INSERT trigger writes an
#     audit row, and the BEFORE trigger raises an error for one value (P0001: rejected).
#   - fk_t: a FOREIGN KEY to fk_parent; rows without parent rejected (23503).
# Checks: exactly the good rows present; each bad row in aq.fast_ingest_rejects with its
# sqlstate, table name, the writing role and its row text (recognised by a marker in the
# row); memoptimize_write_area.rejected_rows and applied_rows count them; the drain
# worker survived (no abnormal exit in the log, the same worker process still there if it
# stays up) and later rows still apply.
use strict;
use warnings;

use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $t_start = time;
my $node = PostgreSQL::Test::Cluster->new('ingest_poison');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
autovacuum = off
));
$node->start;
my $log_start = -s $node->logfile;

$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
CREATE TABLE p_t (id int PRIMARY KEY, v int NOT NULL CHECK (v >= 0), note text);
INSERT INTO p_t SELECT g, g, 'pre-' || g FROM generate_series(1, 10) g;   -- ordinary rows
SELECT aq.enable_fast_ingest('p_t');

CREATE TABLE trig_audit (id int, v int, by_role text);
CREATE TABLE trig_t (id int PRIMARY KEY, v int, note text);
CREATE FUNCTION trig_before() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.v = 13 THEN
    RAISE EXCEPTION 'unlucky row %', NEW.id USING ERRCODE = 'P0001';
  END IF;
  NEW.v := NEW.v * 100;
  RETURN NEW;
END $$;
CREATE FUNCTION trig_after() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO trig_audit VALUES (NEW.id, NEW.v, current_user);
  RETURN NULL;
END $$;
CREATE TRIGGER trig_t_before BEFORE INSERT ON trig_t FOR EACH ROW EXECUTE FUNCTION trig_before();
CREATE TRIGGER trig_t_after AFTER INSERT ON trig_t FOR EACH ROW EXECUTE FUNCTION trig_after();
SELECT aq.enable_fast_ingest('trig_t');

CREATE TABLE fk_parent (id int PRIMARY KEY);
INSERT INTO fk_parent SELECT generate_series(1, 5);
CREATE TABLE fk_t (id int PRIMARY KEY, parent int REFERENCES fk_parent, note text);
SELECT aq.enable_fast_ingest('fk_t');

CREATE ROLE ingest_writer LOGIN;
GRANT USAGE ON SCHEMA aq TO ingest_writer;
GRANT INSERT, SELECT ON p_t, trig_t, fk_t TO ingest_writer;
GRANT INSERT ON trig_audit TO ingest_writer;
GRANT SELECT ON fk_parent TO ingest_writer;
});

sub set_delay
{
	my ($ms) = @_;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET aq.fast_ingest_drain_delay = $ms; SELECT pg_reload_conf();");
	# A new session sees the reloaded file once the postmaster has processed SIGHUP (and
	# signalled its children); the running workers then get a moment to process it.
	$node->poll_query_until('postgres',
		"SELECT setting = '$ms' FROM pg_settings WHERE name = 'aq.fast_ingest_drain_delay'")
	  or die "the drain delay $ms did not take effect";
	usleep(500_000);
}

sub drain_pids
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity WHERE backend_type ILIKE '%aq%fast%ingest%drain%'");
}

my $before = $node->safe_psql('postgres', 'SELECT applied_rows, rejected_rows FROM aq.memoptimize_write_area');
my ($applied0, $rejected0) = split /\|/, $before;

set_delay(600000);

# The writes, as a non-superuser (the drain applies them as this role).
my $writer = $node->connstr('postgres') . ' user=ingest_writer';
my ($rc, $out, $err) = $node->psql('postgres', q{
BEGIN;
-- good rows 11..40
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO p_t SELECT g, g, 'good-' || g FROM generate_series(11, 40) g;
-- duplicates of rows already in the table
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO p_t VALUES (3, 3, 'dup-existing-3'), (7, 7, 'dup-existing-7');
-- CHECK violations
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO p_t VALUES (41, -1, 'check-41');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO p_t VALUES (42, 42, 'good-42'), (43, -5, 'check-43'), (44, 44, 'good-44');
-- a duplicate inside the batch: the first one (good-45) wins
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO p_t VALUES (45, 45, 'good-45');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO p_t VALUES (45, 46, 'dup-batch-45');
COMMIT;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO p_t VALUES (46, 46, 'good-46'), (12, 12, 'dup-batch-12'), (47, 47, 'good-47');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO p_t VALUES (48, NULL, 'notnull-48');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO p_t VALUES (49, 49, 'good-49');

INSERT /*+ MEMOPTIMIZE_WRITE */ INTO trig_t VALUES (1, 1, 'trig-good-1'), (2, 13, 'trig-unlucky-2'), (3, 3, 'trig-good-3');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO trig_t VALUES (1, 5, 'trig-dup-1');

INSERT /*+ MEMOPTIMIZE_WRITE */ INTO fk_t VALUES (1, 1, 'fk-good-1'), (2, 99, 'fk-orphan-2'), (3, 5, 'fk-good-3');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO fk_t VALUES (4, 100, 'fk-orphan-4'), (5, NULL, 'fk-good-null-5');
SELECT aq.get_write_hwm_seqid();
}, connstr => $writer, on_error_stop => 1);
is($rc, 0, 'the writes (good and bad rows) were all accepted at commit') or diag($err);
my $write_hwm = $out;

is($node->safe_psql('postgres', 'SELECT (SELECT count(*) FROM p_t WHERE id > 10) + (SELECT count(*) FROM trig_t) + (SELECT count(*) FROM fk_t)'),
	'0', 'with the drain delay nothing has been applied yet');
is($node->safe_psql('postgres', 'SELECT rows_buffered FROM aq.memoptimize_write_area'),
	'52', 'memoptimize_write_area.rows_buffered = 52 (everything written is waiting in the ring)');

my $pids_before = drain_pids();
set_delay(0);
my $t0 = time;
$node->safe_psql('postgres', "SELECT aq.writes_flush('60 s')");
note sprintf('writes_flush after the delay was lowered: %.2f s', time - $t0);

my $apply_hwm = $node->safe_psql('postgres', 'SELECT aq.get_apply_hwm_seqid()');
ok($write_hwm =~ /^\d+$/ && $apply_hwm =~ /^\d+$/ && $apply_hwm >= $write_hwm,
	"apply hwm ($apply_hwm) >= the writer's write hwm ($write_hwm): rejected rows count as processed");

# ---- p_t
is($node->safe_psql('postgres', q{SELECT string_agg(id || ':' || v || ':' || note, ' ' ORDER BY id) FROM p_t WHERE id > 10}),
	join(' ', map { "$_:$_:good-$_" } 11 .. 40, 42, 44 .. 47, 49),
	'p_t: exactly the good rows were applied (the first of two duplicates in the batch wins)');
is($node->safe_psql('postgres', q{SELECT string_agg(id || ':' || note, ' ' ORDER BY id) FROM p_t WHERE id <= 10}),
	join(' ', map { "$_:pre-$_" } 1 .. 10), 'p_t: the rows that were already there are unchanged');

# rejects: marker -> expected sqlstate
my %want = (
	'dup-existing-3' => '23505', 'dup-existing-7' => '23505', 'dup-batch-45' => '23505',
	'dup-batch-12'   => '23505', 'check-41'       => '23514', 'check-43'     => '23514',
	'notnull-48'     => '23502', 'trig-unlucky-2' => 'P0001', 'trig-dup-1'   => '23505',
	'fk-orphan-2'    => '23503', 'fk-orphan-4'    => '23503');
my $rejects = $node->safe_psql('postgres', q{
SELECT coalesce(substring(row_text from '(dup-existing-\d+|dup-batch-\d+|check-\d+|notnull-\d+|trig-[a-z]+-\d+|fk-[a-z]+-\d+)'), '?' || row_text),
       sqlstate, table_name, role_name, relid::regclass::text, seqid, message <> ''
  FROM aq.fast_ingest_rejects ORDER BY seqid});
my (%got, @odd);
my $prev_seq = 0;
for my $line (split /\n/, $rejects)
{
	my ($marker, $state, $table, $role, $relid, $seqid, $has_msg) = split /\|/, $line;
	push @odd, "reject listed twice: $marker" if exists $got{$marker};
	$got{$marker} = $state;
	(my $tname = $marker) =~ s/^(trig|fk).*/$1_t/;
	$tname = 'p_t' if $tname eq $marker;
	push @odd, "$marker: table_name '$table', relid '$relid' (expected $tname)"
	  unless $table =~ /(^|\.)$tname$/ && $relid eq $tname;
	push @odd, "$marker: role_name '$role' (expected ingest_writer)" unless $role eq 'ingest_writer';
	push @odd, "$marker: no message" unless $has_msg eq 't';
	push @odd, "$marker: seqid $seqid not above the previous one / not <= apply hwm"
	  unless $seqid > $prev_seq && $seqid <= $apply_hwm;
	$prev_seq = $seqid;
}
is(join(' ', map { "$_=" . ($got{$_} // 'missing') } sort keys %got),
	join(' ', map { "$_=$want{$_}" } sort keys %want),
	'aq.fast_ingest_rejects holds exactly the bad rows, each with its sqlstate (23505, 23514, 23502, 23503, P0001)');
is(join("\n", @odd), '', 'each reject names its table, relid, the writing role, a message and a seqid in order');

# ---- trig_t
is($node->safe_psql('postgres', q{SELECT string_agg(id || ':' || v || ':' || note, ' ' ORDER BY id) FROM trig_t}),
	'1:100:trig-good-1 3:300:trig-good-3',
	'trig_t: the BEFORE trigger ran (v * 100), its failing row and the duplicate were rejected');
is($node->safe_psql('postgres', q{SELECT string_agg(id || ':' || v || ':' || by_role, ' ' ORDER BY id) FROM trig_audit}),
	'1:100:ingest_writer 3:300:ingest_writer',
	'trig_t: the AFTER trigger ran once per applied row, as the writing role (nothing left from rolled-back attempts)');

# ---- fk_t
is($node->safe_psql('postgres', q{SELECT string_agg(id || ':' || coalesce(parent::text, 'null'), ' ' ORDER BY id) FROM fk_t}),
	'1:1 3:5 5:null', 'fk_t: rows with a parent (or NULL) applied, orphans rejected');

# ---- counters
my $after = $node->safe_psql('postgres', 'SELECT applied_rows, rejected_rows, rows_buffered FROM aq.memoptimize_write_area');
my ($applied1, $rejected1, $buffered1) = split /\|/, $after;
is($rejected1 - $rejected0, scalar(keys %want), 'memoptimize_write_area.rejected_rows counts the ' . scalar(keys %want) . ' rejects');
is($applied1 - $applied0, 36 + 2 + 3, 'memoptimize_write_area.applied_rows counts the 41 applied rows');
is($buffered1, 0, 'nothing left buffered');
my $progress = $node->safe_psql('postgres', q{
SELECT sum(applied_rows), sum(rejected_rows) FROM aq.fast_ingest_progress
 WHERE epoch = (SELECT epoch FROM aq.memoptimize_write_area)});
is($progress, '41|' . scalar(keys %want), 'aq.fast_ingest_progress (this epoch) counts the applied and rejected rows');

# ---- the drain survived
my $log = slurp_file($node->logfile, $log_start);
unlike($log, qr/terminated by signal|exited with exit code [^0]|PANIC|TRAP:/,
	'no process exited abnormally (the drain worker handled the bad rows without dying)');
my $pids_after = drain_pids();
note "drain workers before: '$pids_before', after: '$pids_after'";
# The worker that waited out the delay (it runs while its database has rows in the ring)
# is the one that applied the batch, bad rows and all: the same process is still there.
# (An idle worker exits by itself only after a few seconds.)
isnt($pids_before, '', "a drain worker ran while the rows waited in the ring ($pids_before)");
is($pids_after, $pids_before, 'the same drain worker is still running after applying the batch with the bad rows');

# Later rows still apply (after the rejects) — as the writer, with write_end.
($rc, $out, $err) = $node->psql('postgres', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO p_t SELECT g, g, 'later-' || g FROM generate_series(100, 149) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO fk_t VALUES (10, 2, 'later');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO trig_t VALUES (10, 10, 'later');
SELECT aq.write_end('30 s');
SELECT (SELECT count(*) FROM p_t WHERE note LIKE 'later-%') || ' ' || (SELECT count(*) FROM fk_t WHERE id = 10)
       || ' ' || (SELECT v FROM trig_t WHERE id = 10);
}, connstr => $writer, on_error_stop => 1);
is($rc . $err, '0', 'later writes and write_end succeed') or diag($err);
is((split /\n/, $out)[-1], '50 1 1000', 'later rows were applied after the poison rows (p_t 50, fk_t 1, trig_t with the trigger)');
is($node->safe_psql('postgres', 'SELECT rejected_rows FROM aq.memoptimize_write_area'), $rejected1,
	'no further rejects');

# ---- a hostile trigger: it cancels the drain's own statement (pg_cancel_backend of
# pg_backend_pid(), then sleeps into the cancel).  Written by the superuser (the drain
# worker counts as a superuser process: a non-superuser may not cancel it).  That row is rejected; the rows around it
# (other transactions) are applied; writes_flush returns; no crash.
my $log_mark = -s $node->logfile;
$node->safe_psql('postgres', q{
CREATE TABLE hostile_t (id int PRIMARY KEY, v int, note text);
CREATE FUNCTION hostile_before() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.v = 666 THEN
    PERFORM pg_cancel_backend(pg_backend_pid());
    PERFORM pg_sleep(2);
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER hostile_t_before BEFORE INSERT ON hostile_t FOR EACH ROW EXECUTE FUNCTION hostile_before();
SELECT aq.enable_fast_ingest('hostile_t');
});
my $rejected2 = $node->safe_psql('postgres', 'SELECT rejected_rows FROM aq.memoptimize_write_area');
set_delay(600000);
($rc, $out, $err) = $node->psql('postgres', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO hostile_t VALUES (1, 1, 'hostile-good-1');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO hostile_t VALUES (2, 666, 'hostile-cancel-2');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO hostile_t VALUES (3, 3, 'hostile-good-3'), (4, 4, 'hostile-good-4');
});
is($rc . $err, '0', 'hostile_t: rows committed') or diag($err);
set_delay(0);
$t0 = time;
($rc, $out, $err) = $node->psql('postgres', "SELECT aq.writes_flush('60 s')");
is($rc . $err, '0', sprintf('hostile_t: writes_flush returns (%.1f s)', time - $t0)) or diag($err);
is($node->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM hostile_t}), '1,3,4',
	'hostile_t: the rows in the other transactions were applied, the cancelling one was not');
my $hostile = $node->safe_psql('postgres',
	q{SELECT sqlstate || ': ' || message FROM aq.fast_ingest_rejects WHERE row_text LIKE '%hostile-cancel-2%'});
isnt($hostile, '', "hostile_t: the cancelling row is in aq.fast_ingest_rejects ($hostile)");
is($node->safe_psql('postgres', 'SELECT rejected_rows FROM aq.memoptimize_write_area') - $rejected2, 1,
	'hostile_t: rejected_rows grew by 1');
my $hostile_log = slurp_file($node->logfile, $log_mark);
my @exits = $hostile_log =~ /(background worker "aq fast ingest[^"]*" \(PID \d+\) exited with exit code \d+)/g;
note 'hostile_t: drain exits: ' . (@exits ? join('; ', @exits) : 'none');
unlike($hostile_log, qr/terminated by signal|PANIC|TRAP:/, 'hostile_t: no crash');

$node->stop;
$log = slurp_file($node->logfile, $log_start);
unlike($log, qr/PANIC|TRAP:|terminated by signal/, 'the server log shows no PANIC, TRAP or process killed by a signal');
note sprintf('total %.1f s', time - $t_start);
done_testing();
