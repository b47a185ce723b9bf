# Fast ingest (MEMOPTIMIZE_WRITE): DDL on a table while its rows wait in the ring.
#
# With aq.fast_ingest_drain_delay raised (ALTER SYSTEM + reload) 100 rows are committed
# into each of these tables and stay undrained (none of them visible yet); then:
#   drop_t        DROP TABLE
#   recreate_t    DROP TABLE and CREATE TABLE of the same name (a new relation, enabled
#                 again): the old rows must not land in the new table
#   add_t         ALTER TABLE ADD COLUMN extra int DEFAULT 7
#   dropcol_t     ALTER TABLE DROP COLUMN (a column in the middle)
#   int8_t        ALTER COLUMN v TYPE bigint (table rewrite, wider type)
#   text_t        ALTER COLUMN v TYPE text USING v::text (a different type altogether)
#   typmod_t      ALTER COLUMN v TYPE varchar(5) (was varchar(10)), n TYPE numeric(4,1)
#                 (was numeric(10,2)): the same types, narrower; the pending values do
#                 not fit (an applied row must fit its column's declared type)
#   domain_t      ALTER DOMAIN ... ADD CONSTRAINT CHECK (VALUE > 0) on its column's domain;
#                 the pending values are negative (an applied row must satisfy it)
# Then the delay is lowered and aq.writes_flush() waits for the drain.  Phase 2 does the
# same with REVOKE, disable_fast_ingest, RENAME, TRUNCATE and DROP DATABASE ... WITH
# (FORCE); then TOAST values whose source table is truncated before the drain, and a plain
# DROP DATABASE right after fast ingest into it.  Phase 4: ALTER COLUMN TYPE between two
# hinted inserts of the same transaction.  Checks: no crash,
# the DDL did not hang (lock_timeout), every row of every table is accounted for exactly
# once — applied with its values intact (and the new column's default) or rejected
# (aq.fast_ingest_rejects with a message, or at least counted in rejected_rows for a
# dropped table); later writes into the altered tables apply; the server log shows no
# PANIC, TRAP or process terminated by a signal.
use strict;
use warnings;

use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use AqIngest;

my $t_start = time;
my $node = PostgreSQL::Test::Cluster->new('ingest_ddl');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
autovacuum = off
restart_after_crash = on    # a crash fails the checks below, but lets the file finish
));
$node->start;
my $log_start = -s $node->logfile;

$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
CREATE TABLE drop_t (id int NOT NULL, v text);
CREATE TABLE recreate_t (id int NOT NULL, v text);
CREATE TABLE add_t (id int NOT NULL, v text);
CREATE TABLE dropcol_t (id int NOT NULL, gone text, v text);
CREATE TABLE int8_t (id int NOT NULL, v int, w text);
CREATE TABLE text_t (id int NOT NULL, v int, w text);
CREATE TABLE typmod_t (id int NOT NULL, v varchar(10), n numeric(10,2));
CREATE DOMAIN ddl_posint AS int;
CREATE TABLE domain_t (id int NOT NULL, v ddl_posint);
SELECT aq.enable_fast_ingest(t) FROM unnest('{drop_t,recreate_t,add_t,dropcol_t,int8_t,text_t,typmod_t,domain_t}'::regclass[]) t;
});

sub set_delay { AqIngest::set_drain_delay($node, $_[0]); }

my ($applied0, $rejected0) = split /\|/,
  $node->safe_psql('postgres', 'SELECT applied_rows, rejected_rows FROM aq.memoptimize_write_area');

set_delay(600000);
my ($rc, $out, $err) = $node->psql('postgres', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO drop_t SELECT g, 'v' || g FROM generate_series(1, 100) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO recreate_t SELECT g, 'v' || g FROM generate_series(1, 100) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO add_t SELECT g, 'v' || g FROM generate_series(1, 100) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO dropcol_t SELECT g, 'gone' || g, 'v' || g FROM generate_series(1, 100) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO int8_t SELECT g, g * 3, 'w' || g FROM generate_series(1, 100) g;
BEGIN;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO text_t SELECT g, g * 3, 'w' || g FROM generate_series(1, 50) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO text_t VALUES (51, NULL, 'w51');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO text_t SELECT g, g * 3, 'w' || g FROM generate_series(52, 100) g;
COMMIT;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO typmod_t SELECT g, 'abcdefghij', 12345.67 FROM generate_series(1, 100) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO domain_t SELECT g, -g FROM generate_series(1, 100) g;
SELECT aq.get_write_hwm_seqid();
});
is($rc . $err, '0', '800 rows committed into eight tables') or diag($err);
my $write_hwm = $out;
is($node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM drop_t) + (SELECT count(*) FROM recreate_t) + (SELECT count(*) FROM add_t)
     + (SELECT count(*) FROM dropcol_t) + (SELECT count(*) FROM int8_t) + (SELECT count(*) FROM text_t)
     + (SELECT count(*) FROM typmod_t) + (SELECT count(*) FROM domain_t)}),
	'0', 'with the drain delay none of them is applied yet');

my %oid = map { $_ => $node->safe_psql('postgres', "SELECT '$_'::regclass::oid") }
  qw(drop_t recreate_t add_t dropcol_t int8_t text_t typmod_t domain_t);

# The DDL, each statement on its own (none may hang on a lock held by the drain).
for my $ddl (
	'DROP TABLE drop_t',
	"DROP TABLE recreate_t; CREATE TABLE recreate_t (id int NOT NULL, v text); SELECT aq.enable_fast_ingest('recreate_t')",
	'ALTER TABLE add_t ADD COLUMN extra int DEFAULT 7',
	'ALTER TABLE dropcol_t DROP COLUMN gone',
	'ALTER TABLE int8_t ALTER COLUMN v TYPE bigint',
	'ALTER TABLE text_t ALTER COLUMN v TYPE text USING v::text',
	'ALTER TABLE typmod_t ALTER COLUMN v TYPE varchar(5), ALTER COLUMN n TYPE numeric(4,1)',
	'ALTER DOMAIN ddl_posint ADD CONSTRAINT ddl_posint_check CHECK (VALUE > 0)')
{
	my ($r, $o, $e) = $node->psql('postgres', "SET lock_timeout = '20s'; $ddl");
	is($r . $e, '0', "DDL with rows pending: $ddl") or diag($e);
}

my $t0 = time;
set_delay(0);
($rc, $out, $err) = $node->psql('postgres', "SELECT aq.writes_flush('60 s')");
is($rc . $err, '0', 'writes_flush returns after the DDL') or diag($err);
note sprintf('writes_flush: %.2f s', time - $t0);
my $apply_hwm = $node->safe_psql('postgres', 'SELECT aq.get_apply_hwm_seqid()');
ok($write_hwm =~ /^\d+$/ && $apply_hwm =~ /^\d+$/ && $apply_hwm >= $write_hwm,
	"apply hwm ($apply_hwm) >= write hwm ($write_hwm): every pending row was processed");

my $server_up = $node->safe_psql('postgres', 'SELECT 1');
is($server_up, '1', 'the server is up');

# Rejects per relation (by the relid the row was written for).
my %rej;
my %rej_msg;
for my $line (split /\n/, $node->safe_psql('postgres',
	q{SELECT relid::oid, count(*), count(*) FILTER (WHERE coalesce(message, '') <> ''), min(sqlstate), min(message)
	    FROM aq.fast_ingest_rejects GROUP BY relid::oid}))
{
	my ($relid, $n, $with_msg, $state, $msg) = split /\|/, $line;
	$rej{$relid} = $n;
	$rej_msg{$relid} = "$n rejects, $with_msg with a message, e.g. $state: $msg";
	note "rejects for relid $relid: $rej_msg{$relid}";
}
my ($applied1, $rejected1) = split /\|/,
  $node->safe_psql('postgres', 'SELECT applied_rows, rejected_rows FROM aq.memoptimize_write_area');

# drop_t (and the old recreate_t): their rows cannot be applied anywhere.
for my $t ('drop_t', 'recreate_t')
{
	is($rej{ $oid{$t} } // 0, 100, "$t: the 100 rows of the dropped table are in aq.fast_ingest_rejects")
	  or diag("rejects by relid: " . join(', ', map { "$_=$rej{$_}" } sort keys %rej));
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM recreate_t'), '0',
	'recreate_t: no row written for the dropped table landed in the new table of the same name');

# The altered tables: each row applied (values intact) or rejected, exactly once.
my %check = (
	add_t     => q{SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE v IS DISTINCT FROM 'v' || id OR extra IS DISTINCT FROM 7) FROM add_t},
	dropcol_t => q{SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE v IS DISTINCT FROM 'v' || id) FROM dropcol_t},
	int8_t    => q{SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE v IS DISTINCT FROM id * 3 OR w IS DISTINCT FROM 'w' || id) FROM int8_t},
	text_t    => q{SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE v IS DISTINCT FROM CASE WHEN id = 51 THEN NULL ELSE (id * 3)::text END OR w IS DISTINCT FROM 'w' || id) FROM text_t},
	# varchar(5) and numeric(4,1) (at most 999.9, one decimal): 'abcdefghij' / 12345.67 do not fit
	typmod_t  => q{SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE length(v) > 5 OR abs(n) >= 1000 OR scale(n) > 1) FROM typmod_t},
	domain_t  => q{SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE v::int <= 0) FROM domain_t},
);
my $applied_here = 0;
for my $t (sort keys %check)
{
	my ($n, $distinct, $wrong) = split /\|/, $node->safe_psql('postgres', $check{$t});
	my $r = $rej{ $oid{$t} } // 0;
	$applied_here += $n;
	is($n + $r, 100, "$t: every pending row accounted for ($n applied, $r rejected)");
	is($distinct, $n, "$t: no row applied twice");
	is($wrong, 0, "$t: the applied rows have their values (no misplaced or misread column, each fits its column's type)");
	note "$t: $n applied, $r rejected" . ($r ? " ($rej_msg{ $oid{$t} })" : '');
}
is($rejected1 - $rejected0 + $applied1 - $applied0, 800,
	sprintf('memoptimize_write_area counts all 800 rows (%d applied, %d rejected)',
		$applied1 - $applied0, $rejected1 - $rejected0));
is($applied1 - $applied0, $applied_here, 'applied_rows matches the rows found in the tables');

# Later writes apply with the new shapes; the drain is alive.
($rc, $out, $err) = $node->psql('postgres', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO add_t VALUES (1001, 'new', 8);
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO dropcol_t VALUES (1001, 'new');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO int8_t VALUES (1001, 10000000000, 'new');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO text_t VALUES (1001, 'text now', 'new');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO recreate_t VALUES (1001, 'new');
SELECT aq.write_end('30 s');
SELECT (SELECT extra FROM add_t WHERE id = 1001) || ' ' || (SELECT v FROM dropcol_t WHERE id = 1001)
    || ' ' || (SELECT v FROM int8_t WHERE id = 1001) || ' ' || (SELECT v FROM text_t WHERE id = 1001)
    || ' ' || (SELECT count(*) FROM recreate_t);
});
is($rc . $err, '0', 'writes after the DDL and write_end succeed') or diag($err);
is((split /\n/, $out)[-1], '8 new 10000000000 text now 1', 'the later rows were applied with the new table shapes');

# ---------------------------------------------------------------- phase 2
# Pending rows, then: the writer's INSERT privilege revoked (priv_t: rejected, 42501, as
# the note promises); aq.disable_fast_ingest (disable_t); RENAME (rename_t: the same
# relation, so applied); TRUNCATE (truncate_t: the old rows go, the pending ones are
# accounted for once); DROP DATABASE ... WITH (FORCE) of a database with pending rows and
# a drain worker waiting in it (writes_flush must still return, nothing may crash).
$node->safe_psql('postgres', q{
CREATE ROLE ddl_writer LOGIN;
GRANT USAGE ON SCHEMA aq TO ddl_writer;
CREATE TABLE priv_t (id int NOT NULL, v text);
GRANT INSERT, SELECT ON priv_t TO ddl_writer;
CREATE TABLE disable_t (id int NOT NULL, v text);
CREATE TABLE rename_t (id int NOT NULL, v text);
CREATE TABLE truncate_t (id int NOT NULL, v text);
INSERT INTO truncate_t SELECT g, 'old' FROM generate_series(1001, 1010) g;
SELECT aq.enable_fast_ingest(t) FROM unnest('{priv_t,disable_t,rename_t,truncate_t}'::regclass[]) t;
CREATE DATABASE ddl_db2;
});
$node->safe_psql('ddl_db2',
	"CREATE EXTENSION aq; CREATE TABLE gone_db_t (id int NOT NULL, v text); SELECT aq.enable_fast_ingest('gone_db_t')");
%oid = (%oid, map { $_ => $node->safe_psql('postgres', "SELECT '$_'::regclass::oid") }
	  qw(priv_t disable_t rename_t truncate_t));

set_delay(600000);
($rc, $out, $err) = $node->psql('postgres',
	"INSERT /*+ MEMOPTIMIZE_WRITE */ INTO priv_t SELECT g, 'v' || g FROM generate_series(1, 100) g",
	connstr => $node->connstr('postgres') . ' user=ddl_writer');
is($rc . $err, '0', 'priv_t: 100 rows committed by ddl_writer') or diag($err);
($rc, $out, $err) = $node->psql('postgres', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO disable_t SELECT g, 'v' || g FROM generate_series(1, 100) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO rename_t SELECT g, 'v' || g FROM generate_series(1, 100) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO truncate_t SELECT g, 'v' || g FROM generate_series(1, 100) g;
});
is($rc . $err, '0', '300 rows committed into disable_t, rename_t, truncate_t') or diag($err);
($rc, $out, $err) = $node->psql('ddl_db2',
	"INSERT /*+ MEMOPTIMIZE_WRITE */ INTO gone_db_t SELECT g, 'v' || g FROM generate_series(1, 100) g");
is($rc . $err, '0', 'ddl_db2: 100 rows committed') or diag($err);
is($node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM priv_t) + (SELECT count(*) FROM disable_t) + (SELECT count(*) FROM rename_t)
     + (SELECT count(*) FROM truncate_t WHERE id <= 100)}),
	'0', 'phase 2: none of the rows is applied yet');
is($node->safe_psql('ddl_db2', 'SELECT count(*) FROM gone_db_t'), '0', 'ddl_db2: none applied yet');
my ($applied2, $rejected2) = split /\|/,
  $node->safe_psql('postgres', 'SELECT applied_rows, rejected_rows FROM aq.memoptimize_write_area');

for my $ddl (
	'REVOKE INSERT ON priv_t FROM ddl_writer',
	"SELECT aq.disable_fast_ingest('disable_t')",
	'ALTER TABLE rename_t RENAME TO renamed_t',
	'TRUNCATE truncate_t',
	'DROP DATABASE ddl_db2 WITH (FORCE)')
{
	my $t1 = time;
	my ($r, $o, $e) = $node->psql('postgres', "SET lock_timeout = '20s'; SET statement_timeout = '30s'; $ddl");
	is($r . $e, '0', sprintf('DDL with rows pending: %s (%.1f s)', $ddl, time - $t1)) or diag($e);
}
$t0 = time;
set_delay(0);
($rc, $out, $err) = $node->psql('postgres', "SELECT aq.writes_flush('60 s')");
is($rc . $err, '0', 'phase 2: writes_flush returns') or diag($err);
note sprintf('phase 2 writes_flush: %.2f s', time - $t0);

%rej = ();
my %rej_state;
for my $line (split /\n/, $node->safe_psql('postgres',
	q{SELECT relid::oid, count(*), string_agg(DISTINCT sqlstate, ','), string_agg(DISTINCT role_name, ','), min(message)
	    FROM aq.fast_ingest_rejects GROUP BY relid::oid}))
{
	my ($relid, $n, $states, $roles, $msg) = split /\|/, $line;
	$rej{$relid} = $n;
	$rej_state{$relid} = "$states|$roles";
	note "rejects for relid $relid: $n, sqlstates $states, roles $roles, e.g. $msg";
}
is(($rej{ $oid{priv_t} } // 0) . ' ' . ($rej_state{ $oid{priv_t} } // ''), '100 42501|ddl_writer',
	'priv_t: after REVOKE INSERT the 100 rows are rejected with 42501, as ddl_writer');
is($node->safe_psql('postgres', 'SELECT count(*) FROM priv_t'), '0', 'priv_t: nothing applied without the privilege');
for my $t ([ 'disable_t', 'disable_t' ], [ 'rename_t', 'renamed_t' ], [ 'truncate_t', 'truncate_t' ])
{
	my ($orig, $now) = @$t;
	my ($n, $distinct, $wrong) = split /\|/, $node->safe_psql('postgres',
		"SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE v IS DISTINCT FROM 'v' || id) FROM $now WHERE id <= 100");
	my $r = $rej{ $oid{$orig} } // 0;
	is($n + $r, 100, "$now: every pending row accounted for ($n applied, $r rejected)");
	is($distinct, $n, "$now: no row applied twice");
	is($wrong, 0, "$now: the applied rows have their values");
}
is($rej{ $oid{rename_t} } // 0, 0, 'renamed_t: RENAME does not change the relation: all 100 rows applied');
is($node->safe_psql('postgres', 'SELECT count(*) FROM truncate_t WHERE id > 1000'), '0',
	'truncate_t: the rows that were there before the TRUNCATE are gone');
my ($applied3, $rejected3) = split /\|/,
  $node->safe_psql('postgres', 'SELECT applied_rows, rejected_rows FROM aq.memoptimize_write_area');
note sprintf('phase 2 counters: %d applied, %d rejected (of 500, 100 of them in the dropped database)',
	$applied3 - $applied2, $rejected3 - $rejected2);
is($node->safe_psql('postgres', 'SELECT rows_buffered FROM aq.memoptimize_write_area'), '0',
	'phase 2: nothing left in the ring (the dropped database\'s rows were released)');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'ddl_db2'"), '0',
	'ddl_db2 is gone');

# Still working after all that.
($rc, $out, $err) = $node->psql('postgres', q{
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO renamed_t VALUES (2001, 'v2001');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO truncate_t VALUES (2001, 'v2001');
SELECT aq.write_end('30 s');
SELECT (SELECT count(*) FROM renamed_t WHERE id = 2001) + (SELECT count(*) FROM truncate_t WHERE id = 2001);
});
is($rc . $err, '0', 'phase 2: later writes and write_end succeed') or diag($err);
is((split /\n/, $out)[-1], '2', 'phase 2: the later rows were applied');

# Values taken from another table's TOAST (INSERT ... SELECT of wide, incompressible
# values, and of compressed ones) while the source table is TRUNCATEd before the drain
# runs: the ring must hold the values themselves, not pointers into the source.
$node->safe_psql('postgres', q{
CREATE TABLE toast_src (id int, big text, small text);
INSERT INTO toast_src
SELECT g, (SELECT string_agg(md5(g::text || i::text), '') FROM generate_series(1, 1000) i), repeat('ab', 3000)
  FROM generate_series(1, 5) g;
CREATE TABLE toast_expect AS SELECT id, md5(big) AS h, md5(small) AS hs FROM toast_src;
CREATE TABLE toast_dst (id int, big text, small text);
SELECT aq.enable_fast_ingest('toast_dst');
});
set_delay(600000);
$node->safe_psql('postgres', 'INSERT /*+ MEMOPTIMIZE_WRITE */ INTO toast_dst SELECT * FROM toast_src');
is($node->safe_psql('postgres', 'SELECT count(*) FROM toast_dst'), '0', 'toast_dst: rows pending');
$node->safe_psql('postgres', 'TRUNCATE toast_src');
set_delay(0);
$node->safe_psql('postgres', "SELECT aq.writes_flush('30 s')");
is($node->safe_psql('postgres', q{
SELECT count(*), count(*) FILTER (WHERE md5(d.big) = e.h AND md5(d.small) = e.hs)
  FROM toast_dst d JOIN toast_expect e USING (id)}), '5|5',
	'toast_dst: the wide and the compressed values arrived intact after the source was truncated');

# A plain DROP DATABASE (no FORCE) right after its rows were applied: the idle drain worker
# of that database must not keep it busy ("being accessed by other users").
$node->safe_psql('postgres', 'CREATE DATABASE ddl_db3');
$node->safe_psql('ddl_db3', q{
CREATE EXTENSION aq;
CREATE TABLE t3 (id int NOT NULL);
SELECT aq.enable_fast_ingest('t3');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t3 SELECT generate_series(1, 10);
SELECT aq.write_end('30 s');
});
is($node->safe_psql('ddl_db3', 'SELECT count(*) FROM t3'), '10', 'ddl_db3: rows applied');
$t0 = time;
($rc, $out, $err) = $node->psql('postgres', 'DROP DATABASE ddl_db3');
is($rc . $err, '0', sprintf('DROP DATABASE right after fast ingest into it succeeds (%.1f s)', time - $t0))
  or diag($err);

# ---------------------------------------------------------------- phase 4
# ALTER COLUMN ... TYPE inside the writing transaction, between hinted inserts: the rows
# before and after it have different column types (same number of columns).  Each row
# must be applied with the value it was written with (or the value the ALTER's conversion
# gives it), or be rejected with its row text as written; never a value it did not have,
# and no crash.  Last, a row whose new-type bytes, read with the old type, would look like
# a huge text value (int 1073741808 read as a varlena header).
my $p4_log = -s $node->logfile;
($rc, $out, $err) = $node->psql('postgres', q{
CREATE TABLE it_bigint (id int NOT NULL, z int);
SELECT aq.enable_fast_ingest('it_bigint');
BEGIN;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO it_bigint VALUES (1, 5);
ALTER TABLE it_bigint ALTER COLUMN z TYPE bigint;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO it_bigint VALUES (2, 10000000000);
COMMIT;
CREATE TABLE it_text (id int NOT NULL, z text);
SELECT aq.enable_fast_ingest('it_text');
BEGIN;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO it_text VALUES (1, 'one');
ALTER TABLE it_text ALTER COLUMN z TYPE int USING length(z);
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO it_text VALUES (2, 12345);
ALTER TABLE it_text ALTER COLUMN z TYPE text;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO it_text VALUES (3, 'three');
COMMIT;
SELECT aq.write_end('30 s');
});
is($rc . $err, '0', 'phase 4: rows written around ALTER COLUMN TYPE in the same transaction, write_end returns')
  or diag($err);
# Per row: what it may be applied as, and the row text it may be rejected with.
my %p4 = (
	'it_bigint 1' => [ [ '5' ], qr/^\(1,5\)$/ ],
	'it_bigint 2' => [ [ '10000000000' ], qr/^\(2,10000000000\)$/ ],
	'it_text 1'   => [ [ 'one', '3' ], qr/^\(1,(one|3)\)$/ ],
	'it_text 2'   => [ [ '12345' ], qr/^\(2,12345\)$/ ],
	'it_text 3'   => [ [ 'three' ], qr/^\(3,three\)$/ ]);
my @p4_bad;
for my $t ('it_bigint', 'it_text')
{
	my %applied = map { split /\|/ } split /\n/,
	  $node->safe_psql('postgres', "SELECT id, coalesce(z::text, 'NULL') FROM $t");
	my %rejected = map { split /\|/, $_, 2 } split /\n/, $node->safe_psql('postgres',
		"SELECT substring(row_text from '^\\((\\d+),'), row_text FROM aq.fast_ingest_rejects WHERE relid = '$t'::regclass");
	for my $key (grep { /^$t / } sort keys %p4)
	{
		my $id = (split ' ', $key)[1];
		my ($ok_values, $ok_text) = @{ $p4{$key} };
		if (exists $applied{$id} && exists $rejected{$id})
		{
			push @p4_bad, "$key: applied and rejected";
		}
		elsif (exists $applied{$id})
		{
			push @p4_bad, "$key: applied with z = '$applied{$id}' (written as " . join(' or ', @$ok_values) . ')'
			  unless grep { $_ eq $applied{$id} } @$ok_values;
		}
		elsif (exists $rejected{$id})
		{
			push @p4_bad, "$key: rejected with row text $rejected{$id}" unless $rejected{$id} =~ $ok_text;
		}
		else
		{
			push @p4_bad, "$key: neither applied nor rejected";
		}
	}
}
is(join("\n", @p4_bad), '', 'phase 4: every row applied with a value it was written with, or rejected with its row as written');

($rc, $out, $err) = $node->psql('postgres', q{
CREATE TABLE it_crash (id int NOT NULL, z text);
SELECT aq.enable_fast_ingest('it_crash');
BEGIN;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO it_crash VALUES (1, 'one');
ALTER TABLE it_crash ALTER COLUMN z TYPE int USING length(z);
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO it_crash VALUES (2, 1073741808);
ALTER TABLE it_crash ALTER COLUMN z TYPE text;
COMMIT;
SELECT aq.write_end('30 s');
});
is($rc . $err, '0', 'phase 4: an int written before the column became text again: write_end returns') or diag($err);
$node->poll_query_until('postgres', 'SELECT true');
unlike(slurp_file($node->logfile, $p4_log), qr/terminated by signal|PANIC|TRAP:/,
	'phase 4: no process crashed (the drain did not read the int as a text header)');

$node->stop;
my $log = slurp_file($node->logfile, $log_start);
unlike($log, qr/PANIC|TRAP:|terminated by signal|exited with exit code [^01]/,
	'the server log shows no PANIC, TRAP, process terminated by a signal or abnormal exit');
note sprintf('total %.1f s', time - $t_start);
done_testing();
