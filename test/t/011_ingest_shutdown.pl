# Fast ingest (MEMOPTIMIZE_WRITE): a clean shutdown drains the ring first.
#
# With aq.fast_ingest_drain_delay raised (ALTER SYSTEM + reload, 10 minutes) 50,000 rows
# are committed (INSERT ... SELECT transactions, multi-row VALUES and one-row commits,
# from two sessions) and stay undrained (the table holds fewer rows than were committed:
# none).  The server is then stopped — 'fast', and in a second round 'smart' — and
# started again: every committed row is in the table exactly once, the payloads intact,
# nothing rejected, and aq.fast_ingest_progress of the old epoch accounts for all of them
# (applied_hwm >= every session's write hwm).  The stop itself must not wait for the
# delay (it is ignored at shutdown).
# Last, a fast shutdown while three sessions are committing: every acknowledged commit is
# in the table after the restart.
use strict;
use warnings;

use Time::HiRes qw(time usleep);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $t_start = time;
my $tmp     = PostgreSQL::Test::Utils::tempdir;
my $n_rows  = $ENV{AQ_TAP_SHUTDOWN_ROWS} // 50000;

my $node = PostgreSQL::Test::Cluster->new('ingest_shutdown');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
aq.fast_ingest_buffer = '64MB'
autovacuum = off
));
$node->start;
my $log_start = -s $node->logfile;

$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
CREATE TABLE sd_t (id bigint NOT NULL, round text NOT NULL, payload text NOT NULL);
SELECT aq.enable_fast_ingest('sd_t');
ALTER SYSTEM SET aq.fast_ingest_drain_delay = 600000;
SELECT pg_reload_conf();
});
$node->poll_query_until('postgres',
	"SELECT setting = '600000' FROM pg_settings WHERE name = 'aq.fast_ingest_drain_delay'")
  or die 'the drain delay did not take effect';
usleep(500_000);

# Session script writing ids $lo..$hi: bulk INSERT ... SELECT transactions of 1000 rows,
# then multi-row VALUES and single-row commits for the last part.  Prints the write hwm.
sub script
{
	my ($file, $lo, $hi, $round) = @_;
	open(my $fh, '>', $file) or die "$file: $!";
	my $id = $lo;
	while ($id <= $hi)
	{
		my $left = $hi - $id + 1;
		my $n = $left > 2000 ? 1000 : $left > 200 ? 10 : 1;
		my $last = $id + $n - 1;
		if ($n == 1000)
		{
			print $fh "INSERT /*+ MEMOPTIMIZE_WRITE */ INTO sd_t SELECT g, '$round', md5(g::text) FROM generate_series($id, $last) g;\n";
		}
		elsif ($n == 10)
		{
			print $fh "BEGIN;\nINSERT /*+ MEMOPTIMIZE_WRITE */ INTO sd_t VALUES "
			  . join(', ', map { "($_, '$round', md5('$_'))" } $id .. $last) . ";\nCOMMIT;\n";
		}
		else
		{
			print $fh "INSERT /*+ MEMOPTIMIZE_WRITE */ INTO sd_t VALUES ($id, '$round', md5('$id'));\n";
		}
		$id = $last + 1;
	}
	print $fh "SELECT 'write_hwm', aq.get_write_hwm_seqid();\n";
	close $fh;
}

sub round
{
	my ($mode, $base) = @_;
	my $t0   = time;
	my $half = int($n_rows / 2);
	my @ranges = ([ $base + 1, $base + $half ], [ $base + $half + 1, $base + $n_rows ]);
	my (@h, @out, @err);
	for my $s (0, 1)
	{
		script("$tmp/$mode.$s.sql", @{ $ranges[$s] }, $mode);
		($out[$s], $err[$s]) = ('', '');
		push @h, IPC::Run::start(
			[ 'psql', '-X', '-q', '-A', '-t', '-F', ' ', '-v', 'ON_ERROR_STOP=1',
			  '-d', $node->connstr('postgres'), '-f', "$tmp/$mode.$s.sql" ],
			'<', \undef, '>', "$tmp/$mode.$s.out", '2>', "$tmp/$mode.$s.err", IPC::Run::timeout(120));
	}
	$_->finish for @h;
	@out = map { slurp_file("$tmp/$mode.$_.out") } 0, 1;
	@err = map { slurp_file("$tmp/$mode.$_.err") } 0, 1;
	my @hwm = map { /^write_hwm (\d+)$/m ? $1 : undef } @out;
	is(join('', @err), '', "$mode: $n_rows rows committed by two sessions without error");
	ok(defined $hwm[0] && defined $hwm[1], "$mode: both sessions report a write hwm (@{[ map { $_ // 'none' } @hwm ]})");
	note sprintf('%s: writing took %.1f s', $mode, time - $t0);

	my ($epoch, $buffered) = split /\|/,
	  $node->safe_psql('postgres', 'SELECT epoch, rows_buffered FROM aq.memoptimize_write_area');
	my $in_table = $node->safe_psql('postgres', "SELECT count(*) FROM sd_t WHERE round = '$mode'");
	cmp_ok($in_table, '<', $n_rows, "$mode: before the stop the table holds $in_table of the $n_rows committed rows");
	note "$mode: rows_buffered before the stop: $buffered";

	my $ts = time;
	$node->stop($mode);
	my $stop_s = time - $ts;
	cmp_ok($stop_s, '<', 60, sprintf('%s: the %s stop finished in %.1f s (the delay is ignored at shutdown)', $mode, $mode, $stop_s));
	$node->start;

	my $res = $node->safe_psql('postgres', qq{
SELECT count(*), count(DISTINCT id), min(id), max(id),
       count(*) FILTER (WHERE payload <> md5(id::text))
  FROM sd_t WHERE round = '$mode'});
	is($res, join('|', $n_rows, $n_rows, $base + 1, $base + $n_rows, 0),
		"$mode: after the restart all $n_rows rows are present exactly once, payloads intact");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM aq.fast_ingest_rejects'), '0', "$mode: nothing rejected");
	my $prog = $node->safe_psql('postgres',
		"SELECT max(applied_hwm), sum(applied_rows) FROM aq.fast_ingest_progress WHERE epoch = $epoch");
	my ($applied_hwm, $applied_rows) = split /\|/, $prog;
	ok(defined $hwm[0] && defined $hwm[1] && $applied_hwm ne '' && $applied_hwm >= $hwm[0] && $applied_hwm >= $hwm[1],
		"$mode: the old epoch's durable applied_hwm ($applied_hwm) >= both sessions' write hwms");
	is($applied_rows, $n_rows, "$mode: aq.fast_ingest_progress of the old epoch counts $n_rows applied rows");
	isnt($node->safe_psql('postgres', 'SELECT epoch FROM aq.memoptimize_write_area'), $epoch,
		"$mode: the restarted server has a new epoch");
	note sprintf('%s: round took %.1f s', $mode, time - $t0);
}

round('fast', 0);
round('smart', 1_000_000);

# A fast shutdown while three sessions keep committing one-row transactions (the drain
# delay still high, so everything they commit waits in the ring).  Every commit a client
# saw acknowledged must be in the table after the restart, exactly once; of the commit in
# flight in each session, at most that one row; nothing after it.
{
	my $mode = 'fast_busy';
	my $t0   = time;
	my $base = 2_000_000;
	my @h;
	for my $c (0 .. 2)
	{
		open(my $fh, '>', "$tmp/$mode.$c.sql") or die $!;
		for my $n (1 .. 60000)
		{
			my $id = $base + $c * 100_000 + $n;
			print $fh "INSERT /*+ MEMOPTIMIZE_WRITE */ INTO sd_t VALUES ($id, '$mode', md5('$id'));\nSELECT 'ack', $id;\n";
		}
		close $fh;
		push @h, IPC::Run::start(
			[ 'psql', '-X', '-q', '-A', '-t', '-F', ' ', '-v', 'ON_ERROR_STOP=1',
			  '-d', $node->connstr('postgres'), '-f', "$tmp/$mode.$c.sql" ],
			'<', \undef, '>', "$tmp/$mode.$c.out", '2>', "$tmp/$mode.$c.err", IPC::Run::timeout(120));
	}
	$node->poll_query_until('postgres', 'SELECT rows_buffered > 3000 FROM aq.memoptimize_write_area')
	  or die 'the writers did not get going';
	my $ts = time;
	$node->stop('fast');
	my $stop_s = time - $ts;
	$_->finish for @h;
	$node->start;
	cmp_ok($stop_s, '<', 60, sprintf('%s: the stop finished in %.1f s', $mode, $stop_s));

	my %count;
	for my $line (split /\n/, $node->safe_psql('postgres',
		"SELECT id, count(*) FROM sd_t WHERE round = '$mode' GROUP BY id"))
	{
		my ($id, $n) = split /\|/, $line;
		$count{$id} = $n;
	}
	my (@missing, @beyond, $acked, $inflight_present);
	$acked = $inflight_present = 0;
	for my $c (0 .. 2)
	{
		my @ids = slurp_file("$tmp/$mode.$c.out") =~ /^ack (\d+)$/mg;
		my $first = $base + $c * 100_000 + 1;
		my $last_acked = @ids ? $ids[-1] : $first - 1;
		is(join(',', @ids[ 0 .. ($#ids < 2 ? $#ids : 2) ]), join(',', grep { $_ <= $last_acked } $first .. $first + 2),
			"$mode: writer $c acknowledged ids in order from $first (" . scalar(@ids) . ' acknowledged)');
		$acked += @ids;
		push @missing, grep { !$count{$_} } @ids;
		$inflight_present += $count{ $last_acked + 1 } ? 1 : 0;
		push @beyond, grep { $_ > $last_acked + 1 && $_ < $first + 100_000 } grep { $_ >= $first && $_ < $first + 100_000 } keys %count;
		(my $e = slurp_file("$tmp/$mode.$c.err")) =~ s/\n/ /g;
		note "$mode: writer $c: $e";
	}
	note "$mode: $acked acknowledged commits, $inflight_present of the 3 in flight present";
	cmp_ok($acked, '>', 3000, "$mode: the writers had more than 3000 commits acknowledged");
	is(scalar(@missing), 0, "$mode: every acknowledged commit is in the table after the clean shutdown")
	  or diag("missing: @missing[0 .. ($#missing < 10 ? $#missing : 10)]");
	is(scalar(@beyond), 0, "$mode: no row beyond the commit in flight");
	is(scalar(grep { $count{$_} > 1 } keys %count), 0, "$mode: no row twice");
	is($node->safe_psql('postgres', "SELECT count(*) FROM sd_t WHERE round = '$mode' AND payload <> md5(id::text)"),
		'0', "$mode: payloads intact");
	note sprintf('%s: round took %.1f s', $mode, time - $t0);
}

$node->stop;
my $log = slurp_file($node->logfile, $log_start);
unlike($log, qr/PANIC|TRAP:|terminated by signal|exited with exit code [^01]/,
	'the server log shows no PANIC, TRAP or abnormal process exit');
note sprintf('total %.1f s', time - $t_start);
done_testing();
