# Crash durability of commit modes.  Clients commit a stream of one-row autocommit INSERTs
# (each prints its id when acknowledged); after ~1 s the whole server is killed with
# kill -9 — the postmaster and every child at once, so WAL still in shared memory is
# lost — and then restarted (crash recovery).
#   - WAIT (aq.commit_write = 'immediate,wait', set with ALTER SYSTEM): every commit a
#     client saw acknowledged is in the table after the restart (0 missing, > 100 of them).
#   - WAIT/BATCH, two clients at once (the group flush, whose commit records are written
#     asynchronously and flushed for the group before the commit returns): likewise.
#   - NOWAIT ('batch,nowait' with wal_writer_delay = 1s, and 'immediate,nowait'; set as
#     connection options): acknowledged commits may be lost, but only the latest ones —
#     the missing acknowledged ids are a suffix of the acknowledged sequence, what survived
#     is a gap-free prefix of what was sent, and the index agrees with the heap (amcheck's
#     bt_index_check with heapallindexed; index scan count = seqscan count).  How many
#     were lost, over how many milliseconds, is reported with diag (it may be 0).
# Every run first checks that its sessions really commit in the mode under test
# (aq.commit_mode()).  fsync stays off, as the framework sets it: a killed process loses
# only what was never written to the kernel, which is what this file is about; an
# operating-system crash is not simulated.
# Environment: AQ_TAP_CRASH_SECONDS (1) — how long the clients commit before the kill.
use strict;
use warnings;

use FindBin;
use Time::HiRes qw(time usleep);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib $FindBin::Bin;
use AqCrash qw(kill_server);

my $run_seconds = $ENV{AQ_TAP_CRASH_SECONDS} // 1;
my $lines_per_client = 100_000;    # far more than a client commits in $run_seconds
my $tmp = PostgreSQL::Test::Utils::tempdir;

my $node = PostgreSQL::Test::Cluster->new('commit_crash');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
wal_writer_delay = '1s'
autovacuum = off
log_statement = none
));
$node->start;
# Only this run's part of the log counts (a rerun in the same tmp_check appends to it).
my $log_start = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE EXTENSION aq');
my $have_amcheck = $node->safe_psql('postgres',
	"SELECT count(*) FROM pg_available_extensions WHERE name = 'amcheck'") eq '1';
$node->safe_psql('postgres', 'CREATE EXTENSION amcheck') if $have_amcheck;
note('amcheck is not available: the index is checked by comparing counts only') unless $have_amcheck;

# A postmaster crash (test/t/AqCrash.pm): every process of the server killed at once.
sub crash_server
{
	my $left = kill_server($node);
	ok($left eq '', 'the postmaster and its children are gone' . ($left ? ": left $left" : ''));
}

# One run: $clients psql processes (connection options $pgoptions) commit into $table for
# ~$run_seconds, then the server is crashed and restarted.  Returns the acknowledged
# commits of each client ([id, epoch of the row's clock_timestamp()] in order) and the ids
# now in the table.
sub crash_run
{
	my (%args) = @_;
	my ($table, $clients, $mode) = @args{qw(table clients mode)};
	$node->safe_psql('postgres',
		"CREATE TABLE $table (id bigint PRIMARY KEY, at timestamptz NOT NULL)");

	my (@handles, @outfiles, @errfiles);
	for my $c (0 .. $clients - 1)
	{
		my $base = $c * 10_000_000;
		my $script = "$tmp/$table.$c.sql";
		open(my $fh, '>', $script) or die "$script: $!";
		print $fh "SELECT 'mode', commit_logging, commit_wait, synchronous_commit, wait_decided_by"
		  . " FROM aq.commit_mode();\n";
		print $fh "INSERT INTO $table (id, at) VALUES (" . ($base + $_)
		  . ", clock_timestamp()) RETURNING id, extract(epoch FROM at);\n"
		  for 1 .. $lines_per_client;
		close $fh;
		push @outfiles, "$tmp/$table.$c.out";
		push @errfiles, "$tmp/$table.$c.err";
		local $ENV{PGOPTIONS} = $args{pgoptions} // '';
		push @handles,
		  IPC::Run::start(
			[ 'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1',
			  '-d', $node->connstr('postgres'), '-f', $script ],
			'>', $outfiles[-1], '2>', $errfiles[-1],
			IPC::Run::timeout(120));
	}
	$node->poll_query_until('postgres',
		"SELECT count(DISTINCT id / 10000000) = $clients FROM $table")
	  or die "the clients did not start committing";
	usleep(int($run_seconds * 1_000_000));
	my $stats = $node->safe_psql('postgres',
		'SELECT commits, waited, not_waited, batch_gathers, batch_followers, log_writer_requests'
		  . ' FROM aq.commit_stats(true)');
	crash_server();
	$_->finish for @handles;    # psql ends when its connection is lost
	$node->start;

	my (@acked, @mode_lines, @errors);
	for my $c (0 .. $clients - 1)
	{
		my @rows;
		for my $line (split /\n/, slurp_file($outfiles[$c]))
		{
			if ($line =~ /^mode\|(.*)$/) { push @mode_lines, $1; }
			elsif ($line =~ /^(\d+)\|([\d.]+)$/) { push @rows, [ $1, $2 ]; }
			else { push @errors, "unexpected output line: $line"; }
		}
		push @acked, \@rows;
	}
	is(join(';', @mode_lines), join(';', ($mode) x $clients),
		"$table: the clients commit as $mode (commit_logging|commit_wait|synchronous_commit|decided by)");
	is(join("\n", @errors), '', "$table: the clients printed nothing unexpected");
	my @stderr = map { slurp_file($_) } @errfiles;
	ok((grep { /server closed the connection unexpectedly|connection to server was lost|Connection reset by peer/ } @stderr) == $clients,
		"$table: every client lost its connection in the crash (still committing)")
	  or diag(join('', @stderr));
	my %present = map { $_ => 1 } split /\n/,
	  $node->safe_psql('postgres', "SELECT id FROM $table");
	my $n = 0;
	$n += @$_ for @acked;
	note("$table: $n acknowledged commits in ${run_seconds}s; aq.commit_stats(true) before the crash: "
		  . "commits|waited|not_waited|batch_gathers|batch_followers|log_writer_requests = $stats");
	return (\@acked, \%present, $stats);
}

# Checks that hold in every mode: per client, what survived is a gap-free prefix of what
# was sent (nothing beyond the one commit in flight), the missing acknowledged ids are a
# suffix of the acknowledged sequence, and the table's index agrees with its heap.
# Returns the lost commits of all clients: [id, epoch, epoch of that client's last ack].
sub check_consistency
{
	my ($table, $acked, $present) = @_;
	my (@lost, @problems);
	for my $c (0 .. $#$acked)
	{
		my $base = $c * 10_000_000;
		my @rows = @{ $acked->[$c] };
		my @ids = map { $_->[0] } @rows;
		push @problems, "client $c: acknowledged ids are not $base+1.." . ($base + @ids)
		  if join(',', @ids) ne join(',', map { $base + $_ } 1 .. @ids);
		my @mine = sort { $a <=> $b } grep { $_ > $base && $_ <= $base + 10_000_000 } keys %$present;
		push @problems, "client $c: the surviving ids are not a gap-free prefix (" . scalar(@mine)
		  . " rows, max " . ($mine[-1] // 'none') . ")"
		  if @mine && ($mine[0] != $base + 1 || $mine[-1] != $base + @mine);
		push @problems, "client $c: id $mine[-1] survived, beyond the last acknowledged one + 1"
		  if @mine && $mine[-1] > $base + @ids + 1;
		my $first_missing;
		for my $i (0 .. $#rows)
		{
			if (!$present->{ $rows[$i][0] })
			{
				$first_missing //= $i;
				push @lost, [ @{ $rows[$i] }, $rows[-1][1] ];
			}
			elsif (defined $first_missing)
			{
				push @problems,
				  "client $c: acknowledged id $rows[$first_missing][0] is missing but the later $rows[$i][0] is present";
				last;
			}
		}
	}
	is(join("\n", @problems), '',
		"$table: the lost acknowledged commits (if any) are the latest ones; the survivors are a gap-free prefix");

	my $seq = $node->safe_psql('postgres',
		"SET enable_indexscan = off; SET enable_indexonlyscan = off; SET enable_bitmapscan = off;\n"
		  . "SELECT count(*) FROM $table WHERE id >= 0");
	my $idx = $node->safe_psql('postgres',
		"SET enable_seqscan = off; SET enable_bitmapscan = off;\n"
		  . "SELECT count(*) FROM $table WHERE id >= 0");
	is($idx, $seq, "$table: the index finds as many rows as the heap has ($seq)");
	if ($have_amcheck)
	{
		my ($rc, $out, $err) = $node->psql('postgres',
			"SELECT bt_index_check('${table}_pkey'::regclass, true)");
		ok($rc == 0 && $err eq '', "$table: amcheck bt_index_check(heapallindexed) finds the index sound")
		  or diag($err);
	}
	return \@lost;
}

sub report_lost
{
	my ($table, $acked, $lost) = @_;
	my $n = 0;
	$n += @$_ for @$acked;
	if (!@$lost)
	{
		diag("$table: 0 of $n acknowledged commits lost");
		return;
	}
	# Per client: from the first lost commit's timestamp to the client's last acknowledged one.
	my %span;
	for my $l (@$lost)
	{
		my $c = int($l->[0] / 10_000_000);
		$span{$c} //= ($l->[2] - $l->[1]) * 1000;
	}
	my ($max_span) = sort { $b <=> $a } values %span;
	diag(sprintf("%s: %d of %d acknowledged commits lost, spanning %.1f ms (first lost commit to last acknowledged)",
		$table, scalar(@$lost), $n, $max_span));
}

# (a) WAIT, set at the system level.
$node->safe_psql('postgres',
	"ALTER SYSTEM SET aq.commit_write = 'immediate,wait'; SELECT pg_reload_conf();");
ok($node->poll_query_until('postgres', 'SELECT wait_decided_by FROM aq.commit_mode()',
		'aq.commit_write gives wait (system)'),
	'ALTER SYSTEM SET aq.commit_write = immediate,wait is in force');

my ($acked, $present) = crash_run(table => 't_wait', clients => 1,
	mode => 'immediate|wait|on|aq.commit_write gives wait (system)');
my $lost = check_consistency('t_wait', $acked, $present);
cmp_ok(scalar(@{ $acked->[0] }), '>', 100, 't_wait: more than 100 commits were acknowledged before the crash');
is(scalar(@$lost), 0, 't_wait: every acknowledged WAIT commit survived the crash');
report_lost('t_wait', $acked, $lost);

# (a') WAIT/BATCH from two clients: group flushes.
my $stats;
($acked, $present, $stats) = crash_run(table => 't_group', clients => 2,
	pgoptions => '-c aq.commit_write=batch,wait',
	mode => 'batch|wait|on|aq.commit_write gives wait (session)');
$lost = check_consistency('t_group', $acked, $present);
cmp_ok(scalar(@{ $acked->[0] }) + scalar(@{ $acked->[1] }), '>', 100,
	't_group: more than 100 commits were acknowledged before the crash');
is(scalar(@$lost), 0, 't_group: every acknowledged WAIT/BATCH commit survived the crash');
report_lost('t_group', $acked, $lost);
my (undef, undef, undef, $gathers, $followers) = split /\|/, $stats;
cmp_ok($gathers + $followers, '>', 0,
	"t_group: the group flush was exercised ($gathers commits gathered peers, $followers were flushed by a peer)");

# (b) NOWAIT: BATCH (the WAL writer's own pace) and IMMEDIATE (the WAL writer woken per commit).
for my $logging ('batch', 'immediate')
{
	my $table = "t_${logging}_nowait";
	($acked, $present) = crash_run(table => $table, clients => 1,
		pgoptions => "-c aq.commit_write=$logging,nowait",
		mode => "$logging|nowait|off|aq.commit_write gives nowait (session)");
	$lost = check_consistency($table, $acked, $present);
	cmp_ok(scalar(@{ $acked->[0] }), '>', 100, "$table: more than 100 commits were acknowledged before the crash");
	report_lost($table, $acked, $lost);
}

$node->stop;
my $log = slurp_file($node->logfile, $log_start);
unlike($log, qr/PANIC|TRAP:|terminated by signal/, 'the server log shows no PANIC, TRAP or child killed under a live postmaster');
my $restarts = () = $log =~ /automatic recovery in progress/g;
is($restarts, 4, 'the server went through crash recovery four times');
done_testing();
