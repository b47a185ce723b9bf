# Helpers shared by the fast-ingest TAP tests (test/t/0*_ingest_*.pl).
package AqIngest;

use strict;
use warnings;

use Exporter 'import';
use Time::HiRes qw(time usleep);
use Test::More ();

our @EXPORT_OK = qw(set_drain_delay wait_for);

# Sets aq.fast_ingest_drain_delay (ms) for the whole server and waits until it is in force.
sub set_drain_delay
{
	my ($node, $ms) = @_;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET aq.fast_ingest_drain_delay = $ms; SELECT pg_reload_conf();");
	$node->poll_query_until('postgres',
		"SELECT setting = '$ms' FROM pg_settings WHERE name = 'aq.fast_ingest_drain_delay'")
	  or die "the drain delay $ms did not take effect";
	# The running drain workers process the SIGHUP on their own; nothing shows when they have.
	usleep(500_000);
}

# Polls $cond (a sub) every 100 ms until it is true (returns 1) or $timeout seconds have
# passed (notes what it waited for, returns 0).
sub wait_for
{
	my ($what, $timeout, $cond) = @_;
	my $deadline = time + $timeout;
	while (time < $deadline)
	{
		return 1 if $cond->();
		usleep(100_000);
	}
	Test::More::note("timed out after $timeout s waiting for $what");
	return 0;
}

1;
