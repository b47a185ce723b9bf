# Copyright: aq project.  PostgreSQL 15 TAP test (PostgreSQL::Test::Cluster).
#
# The README tells the truth (hardening F21): every ```sql block of README.md runs as
# written, in order, each in a session of its own (as a reader pastes it into psql), in a
# fresh database of a cluster with aq preloaded.  tools/readme-sql extracts the blocks; a
# block the README marks with <!-- readme-sql: fails SQLSTATE --> must fail with that
# SQLSTATE.  Afterwards the server is as the README found it: no aq parameter is left set at
# system level (the commit-modes block sets FORCE_WAIT there and must take it back).

use strict;
use warnings;

use File::Basename qw(dirname);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = dirname(__FILE__) . '/../..';
my $readme = "$root/README.md";

my ($records, $err) = ('', '');
IPC::Run::run([ 'perl', "$root/tools/readme-sql", '--blocks', $readme ], '>', \$records, '2>', \$err)
  or die "tools/readme-sql failed: $err";
my @blocks = map {
	my ($head, $sql) = split /\n/, $_, 2;
	my ($line, $expect) = split / /, $head;
	{ line => $line, expect => $expect, sql => $sql }
} grep { length } split /\0/, $records;
cmp_ok(scalar @blocks, '>=', 8, 'tools/readme-sql finds the README\'s SQL blocks');

# The extractor itself: fences in order, an indented one (inside a list item) unindented,
# its directives, and other fences (shell, output) left out.
my $sample = PostgreSQL::Test::Utils::tempdir() . '/sample.md';
open(my $fh, '>', $sample) or die "cannot write $sample: $!";
print $fh <<'MD';
Text.

```sql
SELECT 1;
```

- a list item:

  <!-- readme-sql: fails 42P01 -->
  ```sql
  SELECT * FROM missing;
    -- kept relative indentation
  ```

```sh
echo not sql
```

<!-- readme-sql: skip (shows a statement that cannot run here) -->
```sql
SELECT pg_sleep(3600);
```

```
 output | not run
```

```sql
SELECT 2 \gset
```
MD
close $fh;
my ($sample_records, $sample_err) = ('', '');
IPC::Run::run([ 'perl', "$root/tools/readme-sql", '--blocks', $sample ], '>', \$sample_records, '2>', \$sample_err)
  or die "tools/readme-sql failed: $sample_err";
is($sample_records,
	"3 ok\nSELECT 1;\n\0" . "10 42P01\nSELECT * FROM missing;\n  -- kept relative indentation\n\0" . "28 ok\nSELECT 2 \\gset\n\0",
	'tools/readme-sql: the sql blocks in order, unindented, with their directives; skip and other fences left out');
my ($script, $script_err) = ('', '');
IPC::Run::run([ 'perl', "$root/tools/readme-sql", $sample ], '>', \$script, '2>', \$script_err)
  or die "tools/readme-sql failed: $script_err";
like($script, qr/\\set ON_ERROR_STOP 0\nSELECT \* FROM missing;\n.*\n\\set ON_ERROR_STOP 1\n/,
	'tools/readme-sql: as a psql script, a block expected to fail runs with ON_ERROR_STOP off');

my $node = PostgreSQL::Test::Cluster->new('readme');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
aq.fast_ingest_buffer = 8MB
max_prepared_transactions = 5
log_min_messages = warning
));
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE readme');

for my $b (@blocks)
{
	my ($out, $stderr) = ('', '');
	my $rc = $node->psql('readme', $b->{sql}, stdout => \$out, stderr => \$stderr,
		on_error_stop => 1, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	if ($b->{expect} eq 'ok')
	{
		is($rc, 0, "README.md:$b->{line}: the block runs") or diag($stderr);
		unlike($stderr, qr/^(psql:.*)?(ERROR|WARNING):/m, "README.md:$b->{line}: without errors or warnings")
		  or diag($stderr);
	}
	else
	{
		isnt($rc, 0, "README.md:$b->{line}: the block fails");
		like($stderr, qr/ERROR:  $b->{expect}:/, "README.md:$b->{line}: with SQLSTATE $b->{expect}")
		  or diag($stderr);
	}
}

is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_file_settings WHERE name LIKE 'aq.%' AND sourcefile LIKE '%postgresql.auto.conf'}),
	'0', 'the README leaves no aq parameter set at system level');

$node->stop;
done_testing();
