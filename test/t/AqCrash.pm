# Helpers shared by the TAP tests that crash a server process on purpose.
package AqCrash;

use strict;
use warnings;

use Exporter 'import';

our @EXPORT_OK = qw(kill9_backend wait_crash_restart);

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

1;
