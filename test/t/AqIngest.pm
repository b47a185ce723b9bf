# Helpers shared by the fast-ingest TAP tests (test/t/0*_ingest_*.pl).
package AqIngest;

use strict;
use warnings;

use Exporter 'import';
use Time::HiRes qw(usleep);

our @EXPORT_OK = qw(set_drain_delay);

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

1;
