# Stress of the transaction-end and invalidation paths with fast-ingest rows (hardening A1, A2
# and the checks of the whole list): many sessions, each one transaction made of hinted inserts,
# savepoints, rollbacks to them, releases, and an end — COMMIT, ROLLBACK, an error, or PREPARE
# followed by COMMIT PREPARED / ROLLBACK PREPARED — then, in the same session, one more hinted
# insert and COMMIT (where a transaction's state that outlived its end would be used after
# free).  A model of savepoint semantics says which rows must be applied; the table must hold
# exactly those.  Where the server allows it (builds with assertions), some sessions run with
# debug_discard_caches = 1, so every catalog access in planning and in aq's lookups meets a
# cache reset.  The server must never restart.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('xact_end_stress');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'aq'
max_prepared_transactions = 10
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
CREATE TABLE st (id integer PRIMARY KEY, session integer NOT NULL);
SELECT aq.enable_fast_ingest('st');
});
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my ($ret) = $node->psql('postgres', 'SET debug_discard_caches = 1');
my $can_discard = $ret == 0;
note($can_discard ? 'debug_discard_caches is available: some sessions reset caches at every access'
                  : 'debug_discard_caches is not available on this server (a build without assertions)');

srand(20261201);
my $next_id = 1;
my %expected;     # id => 1 for every row that must be applied
my $sessions = $ENV{AQ_STRESS_SESSIONS} // 150;
my %ends;
for my $s (1 .. $sessions) {
	my @sql = ("\\set ON_ERROR_STOP 0");
	push @sql, 'SET debug_discard_caches = 1;' if $can_discard && $s % 15 == 0;
	push @sql, 'BEGIN;';
	# The model: a stack of savepoint frames, each with the ids inserted since it began.
	my @frames = ([]);
	my @names;
	my $steps = 2 + int(rand(8));
	for (1 .. $steps) {
		my $r = rand();
		if ($r < 0.45) {
			my $n = 1 + int(rand(3));
			my @ids = ($next_id .. $next_id + $n - 1);
			$next_id += $n;
			push @sql, sprintf('INSERT /*+ MEMOPTIMIZE_WRITE */ INTO st SELECT i, %d FROM generate_series(%d, %d) i;',
				$s, $ids[0], $ids[-1]);
			push @{ $frames[-1] }, @ids;
		}
		elsif ($r < 0.65) {
			my $name = 's' . scalar(@names);
			push @names, $name;
			push @frames, [];
			push @sql, "SAVEPOINT $name;";
		}
		elsif ($r < 0.85 && @names) {
			# ROLLBACK TO keeps the savepoint (empty again); the frames above it are gone.
			my $k = int(rand(@names));
			splice(@names, $k + 1);
			splice(@frames, $k + 2);
			$frames[-1] = [];
			push @sql, "ROLLBACK TO SAVEPOINT $names[$k];";
		}
		elsif (@names) {
			# RELEASE merges the savepoint's rows, and those of the ones after it, into its parent.
			my $k = int(rand(@names));
			push @sql, "RELEASE SAVEPOINT $names[$k];";
			my @merged = map { @$_ } @frames[ $k + 1 .. $#frames ];
			splice(@names, $k);
			splice(@frames, $k + 1);
			push @{ $frames[-1] }, @merged;
		}
	}
	my @live = map { @$_ } @frames;
	my $end = (qw(commit rollback error prepare_commit prepare_rollback))[ int(rand(5)) ];
	$ends{$end}++;
	if ($end eq 'commit') {
		push @sql, 'COMMIT;';
		$expected{$_} = 1 for @live;
	}
	elsif ($end eq 'rollback') {
		push @sql, 'ROLLBACK;';
	}
	elsif ($end eq 'error') {
		push @sql, 'SELECT 1 / 0;', 'COMMIT;';
	}
	else {
		# Fast-ingest rows cannot take part in two-phase commit: PREPARE refuses them (the
		# transaction is rolled back); a transaction whose rows were all rolled back prepares.
		push @sql, "PREPARE TRANSACTION 'st_$s';";
	}
	# The same session goes on: one more hinted row in a transaction of its own (straight
	# after the PREPARE, before the prepared transaction is decided).
	my $after = $next_id++;
	push @sql, "BEGIN; INSERT /*+ MEMOPTIMIZE_WRITE */ INTO st VALUES ($after, $s); COMMIT;";
	$expected{$after} = 1;
	# When PREPARE failed, there is nothing to decide and this fails too.
	push @sql, ($end eq 'prepare_commit' ? 'COMMIT' : 'ROLLBACK') . " PREPARED 'st_$s';" if $end =~ /^prepare/;
	push @sql, 'SELECT aq.write_end();';
	my ($rc, $out, $err) = $node->psql('postgres', join("\n", @sql));
	if ($err =~ /server closed the connection|terminated abnormally|connection to server was lost/) {
		fail("session $s: the server went away");
		diag($err);
		last;
	}
}
note(join(', ', map { "$_: $ends{$_}" } sort keys %ends));

is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0', 'no prepared transaction is left');
$node->safe_psql('postgres', 'SELECT aq.writes_flush()');
my $got = $node->safe_psql('postgres', 'SELECT coalesce(string_agg(id::text, \',\' ORDER BY id), \'\') FROM st');
my $want = join(',', sort { $a <=> $b } keys %expected);
is($got, $want, 'exactly the rows of the committed transactions and savepoints were applied');
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started, 'the server never restarted');
$node->stop;
unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC|TRAP:/, 'server log shows no crash');
done_testing();
