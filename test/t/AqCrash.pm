# Helpers shared by the TAP tests that crash a server process on purpose.
package AqCrash;

use strict;
use warnings;

use Exporter 'import';
use POSIX qw(WNOHANG);
use Time::HiRes qw(time usleep);

# A postmaster killed with kill -9 stays a zombie until its parent reaps it.  Started through
# pg_ctl, its parent is the machine's init, which on some machines takes a minute to reap; and a
# new postmaster refuses to start while the zombie's pid is in its lock files.  So this test
# process makes itself the subreaper of what it starts (prctl PR_SET_CHILD_SUBREAPER, Linux x86-64;
# elsewhere the lock files are removed instead, below): the orphaned postmaster becomes its child,
# and wait_gone reaps it.
syscall(157, 36, 1) if $^O eq 'linux' && (POSIX::uname())[4] eq 'x86_64';

our @EXPORT_OK = qw(kill9_backend wait_crash_restart kill_server wait_gone alive);

# Waits for the whole crash-restart cycle that the death of $pid began (the server log
# from $offset on): the postmaster saw the death, reinitialized, and accepts connections
# again.  A query alone cannot tell: it can succeed before the postmaster has even
# noticed the death, and the next connection then meets the restart.
sub wait_crash_restart
{
	my ($node, $pid, $offset) = @_;
	$node->wait_for_log(qr/\(PID $pid\) was terminated by signal 9/, $offset);
	$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
	$node->wait_for_log(qr/database system is ready to accept connections/, $offset);
	$node->poll_query_until('postgres', 'SELECT true')
	  or die "the server did not come back after kill -9 of $pid";
}

# kill -9 of one backend $pid, and the crash restart it causes.
sub kill9_backend
{
	my ($node, $pid) = @_;
	my $offset = -s $node->logfile;
	kill('KILL', $pid) or die "kill -9 of $pid: $!";
	wait_crash_restart($node, $pid, $offset);
}

# Is $pid a live process (not gone, not a zombie waiting to be reaped)?
sub alive
{
	my ($pid) = @_;
	return 0 unless kill(0, $pid);
	return process_state($pid) !~ /^[ZX]$/;
}

sub process_state
{
	my ($pid) = @_;
	open(my $fh, '<', "/proc/$pid/stat") or return '';
	my $stat = <$fh>;
	close $fh;
	return ($stat // '') =~ /^\d+ \(.*\) (\S) /s ? $1 : '';
}

# kill -9 of the postmaster and all its children at once: a postmaster crash.  The postmaster is
# stopped first, so that it forks nobody between the listing of its children and the kill.  Waits
# (up to 60 s) until every one of them is dead, i.e. no longer attached to the shared memory, and
# the postmaster reaped (wait_gone).  Returns '' when all are gone, else which are not (pid and
# state), for the caller's test to report.
sub kill_server
{
	my ($node) = @_;
	open(my $fh, '<', $node->data_dir . '/postmaster.pid') or die "no postmaster.pid: $!";
	chomp(my $pm = <$fh>);
	close $fh;
	kill 'STOP', $pm;
	my @children = split ' ', `pgrep -P $pm`;
	kill 'KILL', @children;
	$node->kill9;    # the postmaster (kill -9 of the pid the framework knows)
	return join(', ', map { "$_ (" . (process_state($_) || 'gone') . ')' } wait_gone($node, $pm, 60, @children));
}

# After the postmaster $pm was killed: waits up to $seconds until it and @children are dead (a
# zombie counts as dead; the postmaster is reaped if it is this process's, and waited for 5 s
# otherwise) and returns the pids still alive.  When none is and the postmaster is still a
# zombie, its lock files are removed, so that the server can be started again.
sub wait_gone
{
	my ($node, $pm, $seconds, @children) = @_;
	my $deadline = time + $seconds;
	while (time < $deadline)
	{
		waitpid($pm, WNOHANG);    # ours when this process is the subreaper (above)
		last unless (grep { alive($_) } @children) || kill(0, $pm);
		last if !(grep { alive($_) } @children) && !alive($pm) && time > $deadline - $seconds + 5;
		usleep(10_000);
	}
	my @left = grep { alive($_) } @children, $pm;
	if (!@left && kill(0, $pm))
	{
		# A zombie nobody has reaped yet: it holds nothing, but its pid in the lock files would
		# stop the next postmaster.
		unlink($node->data_dir . '/postmaster.pid');
		unlink($node->host . '/.s.PGSQL.' . $node->port . '.lock') if $node->host =~ m{^/};
	}
	return @left;
}

1;
