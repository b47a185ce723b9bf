# An interactive session for the TAP tests: a psql process fed one statement at a time, so a test
# can hold a transaction open, block in it, and read each statement's output and errors (with the
# SQLSTATE: VERBOSITY=verbose) once psql has run it.
package AqSession;

use strict;
use warnings;

use Exporter 'import';
use IPC::Run;

our @EXPORT_OK = qw(session query finish);

my $marker = 0;

# A session of $node's database $db (user => a role: connect as it).
sub session
{
	my ($node, $db, %opt) = @_;
	my $connstr = $node->connstr($db) . ($opt{user} ? " user=$opt{user}" : '');
	my $s = { in => '', out => '', err => '' };
	$s->{h} = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-q', '-v', 'VERBOSITY=verbose', '-d', $connstr ],
		'<', \$s->{in}, '>', \$s->{out}, '2>', \$s->{err}, IPC::Run::timeout(300));
	return $s;
}

# Runs $sql; returns its output (and, in list context, its errors) once psql has run it.
sub query
{
	my ($s, $sql) = @_;
	$marker++;
	$s->{out} = $s->{err} = '';
	$s->{in} .= "$sql\n\\echo end-$marker\n\\warn end-$marker\n";
	$s->{h}->pump until $s->{out} =~ /^end-$marker\n/m && $s->{err} =~ /^end-$marker\n/m;
	my ($out, $err) = ($s->{out}, $s->{err});
	s/^end-$marker\n//m for $out, $err;
	chomp($out, $err);
	return wantarray ? ($out, $err) : $out;
}

sub finish
{
	my ($s) = @_;
	$s->{in} .= "\\q\n";
	$s->{h}->finish;
}

1;
