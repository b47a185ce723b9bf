# Fast ingest (MEMOPTIMIZE_WRITE) across crashes.
#
# Two scenarios, each on its own id range:
#   (a) kill -9 of one client backend: the postmaster kills every process and restarts
#       (restart_after_crash);
#   (b) kill -9 of the postmaster: its children must exit by themselves (the aq fast
#       ingest workers included: nothing may stay attached to the old shared memory), then
#       the server is started again.
# In each: rows written with the drain delay at 0 and aq.write_end() (applied), then
# aq.fast_ingest_drain_delay raised (ALTER SYSTEM + reload) and more rows committed, which
# stay in the ring; one more session holds uncommitted fast-ingest rows in an open
# transaction (in (a) it is the backend that is killed).  Every transaction is followed by
# aq.get_write_hwm_seqid(), so the client knows the seq ids of its rows (a row of a
# transaction lies in (previous hwm, hwm]).  aq.get_apply_hwm_seqid() is recorded before
# the crash.  After the restart:
#   - the epoch (aq.memoptimize_write_area.epoch) changed;
#   - the durable applied_hwm of the old epoch (aq.fast_ingest_progress) is >= the apply
#     hwm recorded before the crash;
#   - every row with seq id <= that applied_hwm is present, every row above it is absent
#     (lost with the ring), no uncommitted row is present, no row is present twice;
#   - the launcher is back within seconds; with the delay reset, new writes apply
#     (write_end) and carry the new epoch in their seq ids.
# (c) kill -9 of the whole server while three writers commit and the drain applies
#     without delay: the same watermark rules for every acknowledged row (no row of a
#     transaction that was never sent, none twice).
use strict;
use warnings;

use Time::HiRes qw(time usleep);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use AqIngest;
use AqCrash qw(kill9_backend kill_server wait_gone);

my $t_start = time;
my $tmp     = PostgreSQL::Test::Utils::tempdir;

my $node = PostgreSQL::Test::Cluster->new('ingest_crash');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
restart_after_crash = on
autovacuum = off
));
$node->start;
my $log_start = -s $node->logfile;

$node->safe_psql('postgres', q{
CREATE EXTENSION aq;
CREATE TABLE crash_t (id bigint NOT NULL, phase text NOT NULL);
SELECT aq.enable_fast_ingest('crash_t');
});


sub set_delay { AqIngest::set_drain_delay($node, $_[0]); }

# Writes ids $lo..$hi (phase $phase) from one new session: mostly one-row autocommit
# inserts, every 7th transaction 2..6 rows (multi-row VALUES or INSERT ... SELECT).  Returns
# the transactions as [first id, last id, previous write hwm, write hwm] and psql's stderr.
sub write_rows
{
	my ($lo, $hi, $phase, $extra_sql) = @_;
	my ($file) = make_script($lo, $hi, $phase, $extra_sql);
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[ 'psql', '-X', '-q', '-A', '-t', '-F', ' ', '-v', 'ON_ERROR_STOP=1',
		  '-d', $node->connstr('postgres'), '-f', $file ],
		'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	my ($tx, $extra) = parse_output($out);
	return ($tx, $err, $extra);
}

# The script of write_rows; returns its file and the planned transactions ([first, last]).
sub make_script
{
	my ($lo, $hi, $phase, $extra_sql) = @_;
	my $file = "$tmp/$phase.sql";
	my @planned;
	open(my $fh, '>', $file) or die "$file: $!";
	my $id = $lo;
	my $i  = 0;
	while ($id <= $hi)
	{
		my $n = (++$i % 7 == 0) ? 2 + $i % 5 : 1;
		$n = $hi - $id + 1 if $id + $n - 1 > $hi;
		my $last = $id + $n - 1;
		if ($n == 1)
		{
			print $fh "INSERT /*+ MEMOPTIMIZE_WRITE */ INTO crash_t VALUES ($id, '$phase');\n";
		}
		elsif ($i % 2)
		{
			print $fh "INSERT /*+ MEMOPTIMIZE_WRITE */ INTO crash_t SELECT g, '$phase' FROM generate_series($id, $last) g;\n";
		}
		else
		{
			print $fh "BEGIN;\n";
			print $fh "INSERT /*+ MEMOPTIMIZE_WRITE */ INTO crash_t VALUES ($_, '$phase');\n" for $id .. $last;
			print $fh "COMMIT;\n";
		}
		print $fh "SELECT 'tx', $id, $last, aq.get_write_hwm_seqid();\n";
		push @planned, [ $id, $last ];
		$id = $last + 1;
	}
	print $fh $extra_sql // '';
	close $fh;
	return ($file, \@planned);
}

# psql's output of such a script: the transactions as [first id, last id, previous write
# hwm, write hwm], and the other "name value" lines.
sub parse_output
{
	my ($out) = @_;
	my @tx;
	my $prev = 0;
	my %extra;
	for my $line (split /\n/, $out)
	{
		if ($line =~ /^tx (\d+) (\d+) (\d+)$/)
		{
			push @tx, [ $1, $2, $prev, $3 ];
			$prev = $3;
		}
		elsif ($line =~ /^(\w+) (.*)$/) { $extra{$1} = $2; }
	}
	return (\@tx, \%extra);
}

sub area
{
	my $r = $node->safe_psql('postgres',
		'SELECT epoch, rows_buffered, drain_workers, coalesce(apply_hwm, 0) FROM aq.memoptimize_write_area');
	my %a;
	@a{qw(epoch rows_buffered drain_workers apply_hwm)} = split /\|/, $r;
	return \%a;
}

# Look for a child of the postmaster whose process title names the launcher (it works
# whether or not the launcher shows in pg_stat_activity).  Polls for up to 10 s.
sub launcher_running
{
	my $deadline = time + 10;
	while (time < $deadline)
	{
		if (open(my $fh, '<', $node->data_dir . '/postmaster.pid'))
		{
			chomp(my $pm = <$fh> // '');
			close $fh;
			for my $c (split ' ', ($pm =~ /^\d+$/ ? `pgrep -P $pm` : ''))
			{
				open(my $f, '<', "/proc/$c/cmdline") or next;
				local $/;
				my $cmd = <$f> // '';
				close $f;
				return 1 if $cmd =~ /aq fast ingest launcher/;
			}
		}
		usleep(100_000);
	}
	return 0;
}

# One scenario.  $kill->($victim_pid) crashes the server and brings it back.
sub scenario
{
	my ($name, $base, $kill) = @_;
	my $t0 = time;
	set_delay(0);
	# Applied rows.
	my ($tx_a, $err_a, $x_a) = write_rows($base + 1, $base + 500, "${name}_applied",
		"SELECT 'write_end', 'done' FROM (SELECT aq.write_end('30 s')) w;\n");
	is($err_a, '', "$name: the first 500 rows were written without error");
	is($x_a->{write_end}, 'done', "$name: write_end returned");
	is($node->safe_psql('postgres', "SELECT count(*) FROM crash_t WHERE phase = '${name}_applied'"),
		'500', "$name: after write_end the 500 rows are in the table");

	# Pending rows.
	set_delay(600000);
	my ($tx_p, $err_p) = write_rows($base + 501, $base + 2500, "${name}_pending");
	is($err_p, '', "$name: 2000 more rows were committed without error");
	# An open transaction with uncommitted fast-ingest rows.
	my $open = $node->background_psql('postgres', on_error_stop => 0);
	$open->query_safe("BEGIN; INSERT /*+ MEMOPTIMIZE_WRITE */ INTO crash_t SELECT g, '${name}_uncommitted'"
		  . " FROM generate_series($base + 900001, $base + 900100) g;");
	my $victim = $open->query_safe('SELECT pg_backend_pid()');

	my $before     = area();
	my $apply_hwm  = $node->safe_psql('postgres', 'SELECT coalesce(aq.get_apply_hwm_seqid(), 0)');
	my $last_write = $tx_p->[-1][3];
	my $visible    = $node->safe_psql('postgres', "SELECT count(*) FROM crash_t WHERE phase = '${name}_pending'");
	cmp_ok($visible, '<', 2000, "$name: before the crash only $visible of the 2000 pending rows were applied (the delay holds them)");
	ok($apply_hwm >= $tx_a->[-1][3] && $apply_hwm < $last_write,
		"$name: recorded apply hwm $apply_hwm covers the applied rows (>= $tx_a->[-1][3]) but not the pending ones (< $last_write)");
	note "$name: before the crash: epoch $before->{epoch}, rows_buffered $before->{rows_buffered}, apply hwm $apply_hwm";

	my $offset = -s $node->logfile;
	$kill->($victim);
	eval { $open->quit; 1 };    # its server is gone

	# ---- after the restart
	my $after = area();
	isnt($after->{epoch}, $before->{epoch}, "$name: the epoch changed ($before->{epoch} -> $after->{epoch})");
	my $durable = $node->safe_psql('postgres',
		"SELECT coalesce(max(applied_hwm), 0) FROM aq.fast_ingest_progress WHERE epoch = $before->{epoch}");
	ok($durable >= $apply_hwm,
		"$name: the old epoch's durable applied_hwm ($durable) >= the apply hwm recorded before the crash ($apply_hwm)");

	my %count;
	for my $line (split /\n/, $node->safe_psql('postgres',
		"SELECT id, count(*) FROM crash_t WHERE id > $base AND id <= $base + 1000000 GROUP BY id"))
	{
		my ($id, $n) = split /\|/, $line;
		$count{$id} = $n;
	}
	my (@missing, @resurrected, $lost, $kept);
	$lost = $kept = 0;
	for my $tx (@$tx_a, @$tx_p)
	{
		my ($lo, $hi, $prev, $hwm) = @$tx;
		for my $id ($lo .. $hi)
		{
			$count{$id} ? $kept++ : $lost++;
			push @missing, $id if $hwm <= $durable && !$count{$id};
			push @resurrected, $id if $prev >= $durable && $count{$id};
		}
	}
	is(scalar(@missing), 0, "$name: every committed row with seq id <= applied_hwm is present")
	  or diag("missing: @missing[0 .. ($#missing < 10 ? $#missing : 10)]");
	is(scalar(@resurrected), 0, "$name: no row with seq id > applied_hwm is present (those were lost with the ring)")
	  or diag("present: @resurrected[0 .. ($#resurrected < 10 ? $#resurrected : 10)]");
	is(scalar(grep { $count{$_} > 1 } keys %count), 0, "$name: no row is present twice");
	is(scalar(grep { $_ > $base + 900000 } keys %count), 0, "$name: no uncommitted row is present");
	cmp_ok($lost, '>', 0, "$name: the crash lost the undrained rows ($lost lost, $kept kept)");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM aq.fast_ingest_rejects'), '0', "$name: nothing rejected");

	my $tl = time;
	ok(launcher_running(), "$name: the fast ingest launcher is running again");
	note sprintf('%s: launcher found after %.2f s of looking', $name, time - $tl);
	is($after->{rows_buffered}, '0', "$name: the new ring is empty");

	# New writes apply.
	set_delay(0);
	my ($tx_n, $err_n, $x_n) = write_rows($base + 3001, $base + 3200, "${name}_after",
		"SELECT 'write_end', 'done' FROM (SELECT aq.write_end('30 s')) w;\nSELECT 'apply', aq.get_apply_hwm_seqid();\n");
	is($err_n, '', "$name: after the restart 200 rows were written and write_end returned without error");
	is($x_n->{write_end}, 'done', "$name: write_end after the restart returned");
	is($node->safe_psql('postgres', "SELECT count(*), count(DISTINCT id) FROM crash_t WHERE phase = '${name}_after'"),
		'200|200', "$name: the 200 new rows are in the table once each");
	my $new_hwm = @$tx_n ? $tx_n->[-1][3] : 0;
	is($new_hwm >> 40, $after->{epoch}, "$name: the new seq ids carry the new epoch");
	ok(($x_n->{apply} // 0) >= $new_hwm && $new_hwm > 0, "$name: apply hwm ($x_n->{apply}) >= write hwm ($new_hwm)");
	cmp_ok(area()->{drain_workers}, '>=', 0, "$name: memoptimize_write_area readable after the restart");
	note sprintf('%s: %.1f s', $name, time - $t0);
}

# (a) kill -9 of a client backend (the one holding uncommitted rows).
scenario('backend', 0, sub {
	my ($victim) = @_;
	kill9_backend($node, $victim);
	pass('backend: the postmaster restarted after the crash');
});

# (b) kill -9 of the postmaster.
scenario('postmaster', 10_000_000, sub {
	open(my $fh, '<', $node->data_dir . '/postmaster.pid') or die "no postmaster.pid: $!";
	chomp(my $pm = <$fh>);
	close $fh;
	my @children = split ' ', `pgrep -P $pm`;
	my %what;
	for my $c (@children)
	{
		$what{$c} = '?';
		if (open(my $f, '<', "/proc/$c/cmdline"))
		{
			local $/;
			$what{$c} = join(' ', split /\0/, <$f> // '');
			close $f;
		}
	}
	$node->kill9;
	my @left = grep { $_ != $pm } wait_gone($node, $pm, 20, @children);
	is(join(', ', map { "$_ ($what{$_})" } @left), '',
		'postmaster: every child of the killed postmaster exited by itself within 20 s');
	kill 'KILL', @left if @left;
	wait_gone($node, $pm, 10, @left);
	$node->start;
});

# (c) kill -9 of the whole server (postmaster and every child at once) while writers commit
# and the drain applies (no delay): the drain is killed in the middle of its work.  Rows of
# acknowledged transactions: present if their seq id <= the old epoch's durable
# applied_hwm, absent if above it; the transaction in flight in each writer may or may not
# be there; nothing after it; nothing twice.
{
	my $name = 'busy';
	my $t0   = time;
	set_delay(0);
	my $epoch_before = area()->{epoch};
	my (@h, @out, @err, @planned);
	for my $c (0 .. 2)
	{
		my $base = 20_000_000 + $c * 1_000_000;
		my ($file, $planned) = make_script($base + 1, $base + 200_000, "busy_$c");
		push @planned, $planned;
		($out[$c], $err[$c]) = ('', '');
		push @h, IPC::Run::start(
			[ 'psql', '-X', '-q', '-A', '-t', '-F', ' ', '-v', 'ON_ERROR_STOP=1',
			  '-d', $node->connstr('postgres'), '-f', $file ],
			'<', \undef, '>', "$tmp/busy_$c.out", '2>', "$tmp/busy_$c.err", IPC::Run::timeout(120));
	}
	$node->poll_query_until('postgres', 'SELECT count(*) > 3000 FROM crash_t WHERE id > 20000000')
	  or die 'the busy writers did not get going';
	usleep(300_000);
	my $buffered = area()->{rows_buffered};
	my $left = kill_server($node);
	ok($left eq '', "$name: the server and its children were killed at once" . ($left ? ": left $left" : ''));
	$_->finish for @h;
	# (Output goes to files: a pipe nobody reads while the writers run would fill up and stop them.)
	@out = map { slurp_file("$tmp/busy_$_.out") } 0 .. 2;
	@err = map { slurp_file("$tmp/busy_$_.err") } 0 .. 2;
	$node->start;

	my $after = area();
	isnt($after->{epoch}, $epoch_before, "$name: the epoch changed");
	my $durable = $node->safe_psql('postgres',
		"SELECT coalesce(max(applied_hwm), 0) FROM aq.fast_ingest_progress WHERE epoch = $epoch_before");
	my %count;
	for my $line (split /\n/, $node->safe_psql('postgres',
		'SELECT id, count(*) FROM crash_t WHERE id > 20000000 GROUP BY id'))
	{
		my ($id, $n) = split /\|/, $line;
		$count{$id} = $n;
	}
	my (@missing, @resurrected, @beyond, $acked, $kept, $max_acked);
	$acked = $kept = $max_acked = 0;
	for my $c (0 .. 2)
	{
		my ($tx) = parse_output($out[$c]);
		for my $t (@$tx)
		{
			my ($lo, $hi, $prev, $hwm) = @$t;
			$max_acked = $hwm if $hwm > $max_acked;
			for my $id ($lo .. $hi)
			{
				$acked++;
				$kept++ if $count{$id};
				push @missing, $id if $hwm <= $durable && !$count{$id};
				push @resurrected, $id if $prev >= $durable && $count{$id};
			}
		}
		# Transactions after the one in flight were never sent.
		my $next = scalar(@$tx) + 1;
		for my $p (@{ $planned[$c] }[ $next .. $#{ $planned[$c] } ])
		{
			push @beyond, grep { $count{$_} } $p->[0] .. $p->[1];
		}
		my $inflight = $planned[$c][ scalar(@$tx) ];
		my $inflight_present = $inflight ? scalar(grep { $count{$_} } $inflight->[0] .. $inflight->[1]) : 0;
		(my $e = $err[$c]) =~ s/\n/ /g;
		note "$name: writer $c: " . scalar(@$tx) . " transactions acknowledged, $inflight_present rows of the one in flight present; psql: $e";
	}
	note sprintf('%s: %d acknowledged rows, %d kept; durable applied_hwm %d, highest acknowledged write hwm %d; '
		  . '%s rows buffered shortly before the kill', $name, $acked, $kept, $durable, $max_acked, $buffered);
	cmp_ok($acked, '>', 1000, "$name: the writers had more than 1000 rows acknowledged");
	ok($durable > 0, "$name: the old epoch has a durable applied_hwm ($durable)");
	is(scalar(@missing), 0, "$name: every acknowledged row with seq id <= applied_hwm is present")
	  or diag("missing: @missing[0 .. ($#missing < 10 ? $#missing : 10)]");
	is(scalar(@resurrected), 0, "$name: no acknowledged row with seq id > applied_hwm is present")
	  or diag("present: @resurrected[0 .. ($#resurrected < 10 ? $#resurrected : 10)]");
	is(scalar(@beyond), 0, "$name: no row of a transaction that was never sent is present");
	is(scalar(grep { $count{$_} > 1 } keys %count), 0, "$name: no row is present twice");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM aq.fast_ingest_rejects'), '0', "$name: nothing rejected");
	ok(launcher_running(), "$name: the fast ingest launcher is running again");
	my ($tx_n, $err_n, $x_n) = write_rows(29_000_001, 29_000_200, "${name}_after",
		"SELECT 'write_end', 'done' FROM (SELECT aq.write_end('30 s')) w;\n");
	is($err_n . ($x_n->{write_end} // ''), 'done', "$name: after the restart new rows are written and write_end returns");
	is($node->safe_psql('postgres', "SELECT count(*) FROM crash_t WHERE phase = '${name}_after'"), '200',
		"$name: the 200 new rows are in the table");
	note sprintf('%s: %.1f s', $name, time - $t0);
}

$node->stop;
my $log = slurp_file($node->logfile, $log_start);
unlike($log, qr/PANIC|TRAP:/, 'the server log shows no PANIC or TRAP');
# (the whole-server kill of (c) is not reported: the postmaster died with its children)
my @signalled = $log =~ /was terminated by signal (\d+)/g;
is(join(',', @signalled), '9', 'the only process terminated by a signal is the killed backend');
note sprintf('total %.1f s', time - $t_start);
done_testing();
