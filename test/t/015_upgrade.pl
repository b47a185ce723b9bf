# Copyright: aq project.  PostgreSQL 15 TAP test (PostgreSQL::Test::Cluster).
#
# Upgrades keep what users built (hardening E19, E20).  Every kind of object a user makes
# is created at 0.1.0 in database "upgraded", which is then upgraded one version at a time
# (0.1.0 -> 0.2.0 -> 0.3.0 -> 0.4.0 -> 0.5.0 -> 0.6.0 -> 0.7.0), each step adding what its version
# brings; a fresh install of the current version in database "fresh" (CREATE EXTENSION runs
# the one install script sql/aq--0.7.0.sql, none of the upgrade scripts) gets the same objects
# through the current API.  The two must then be the same:
#
#   - aq's catalog, by test/upgrade/catalog.sql: the extension's members (the aq$<queue
#     table> views are the users' objects, not the extension's: E19), every function with its
#     arguments, defaults, properties, body and ACL, users' EXECUTE grants included (E20: the
#     0.3.0 -> 0.4.0 script dropped and recreated four admin functions, and their grants with
#     them), types and their attributes, tables, columns, indexes, constraints, views,
#     policies, triggers, casts, comments, sequences, initial privileges and dependencies;
#     any difference fails the test and is shown as a diff;
#   - `pg_dump --schema-only` of the two databases, normalised (pg_dump omitted member views,
#     and it dumps a member function's grants only where they differ from pg_init_privs);
#   - the users' data: queue catalog, messages, fast-ingest tables, settings;
#   - and what follows: DROP EXTENSION refuses while views depend on aq's catalog, and
#     drop_queue_table, as the queue table's owner, drops the table and its view.
#
# A third database, "repaired", is damaged at 0.4.0 the way the 0.3.0 -> 0.4.0 script of
# 0.4.0 left databases (the views members of the extension, owned by the role that ran the
# upgrade); the 0.4.0 -> 0.5.0 script must repair it.  The grants that script dropped are
# lost for good, so in "repaired" they are made again at 0.4.0, as its users had to.
#
# The library is the current one throughout: it refuses to enqueue into the objects of an
# older version, so messages are written by hand before 0.4.0 (as rows in a queue table).

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'aq'
aq.fast_ingest_buffer = 8MB
log_min_messages = warning
));
$node->start;

sub sql
{
	my ($db, $sql) = @_;
	return $node->safe_psql($db, $sql, extra_params => [ '-v', 'ON_ERROR_STOP=1' ]);
}

$node->safe_psql('postgres', q{
	CREATE ROLE app_owner LOGIN;       -- owns queue tables, creates queues
	CREATE ROLE app_admin LOGIN;       -- may run admin functions and grant them on
	CREATE ROLE producer LOGIN;
	CREATE ROLE consumer LOGIN;
	CREATE ROLE auditor LOGIN;
	CREATE DATABASE upgraded;
	CREATE DATABASE fresh;
	CREATE DATABASE repaired;
});

# Objects every database gets before the extension: types, schemas, tables.
my $user_objects = q{
	CREATE TYPE order_ot AS (id integer, body text);
	CREATE TYPE state_et AS ENUM ('new', 'done');
	CREATE SCHEMA app AUTHORIZATION app_owner;
	GRANT USAGE ON SCHEMA app TO producer, consumer;
	GRANT USAGE, CREATE ON SCHEMA public TO app_owner;
	CREATE TABLE sensor_readings (id bigint PRIMARY KEY, v text);
	CREATE TABLE device_log (id bigint PRIMARY KEY, at timestamptz DEFAULT now());
	GRANT INSERT ON sensor_readings TO producer;
};

# Queue tables of each payload kind, with their queues, grants and messages: written by
# hand before 0.4.0 ($by_hand), by aq.enqueue on a fresh install.
sub queue_tables_010
{
	my ($db, $by_hand) = @_;
	sql($db, q{
		SELECT aq.create_queue_table('orders_qt', 'order_ot', comment => 'orders');
		SELECT aq.create_queue_table('text_qt', 'text');
		SELECT aq.create_queue_table('json_qt', 'jsonb');
		SELECT aq.create_queue_table('bytes_qt', 'bytea');
		SELECT aq.create_queue_table('state_qt', 'state_et');
		SELECT aq.create_queue_table('app_qt', 'integer', queue_table_schema => 'app');
		SELECT aq.create_queue('orders_q', 'orders_qt', max_retries => 3, retry_delay => '10 s', comment => 'first');
		SELECT aq.create_queue('orders_q2', 'orders_qt', retention_time => '1 hour');
		SELECT aq.create_queue('text_q', 'text_qt');
		SELECT aq.create_queue('json_q', 'json_qt');
		SELECT aq.create_queue('bytes_q', 'bytes_qt');
		SELECT aq.create_queue('state_q', 'state_qt');
		SELECT aq.create_queue('app_q', 'app_qt');
		SELECT aq.start_queue(q) FROM unnest(ARRAY['orders_q', 'text_q', 'json_q', 'bytes_q', 'state_q', 'app_q']) q;
		SELECT aq.start_queue('orders_q2', dequeue => false);
		SELECT aq.grant_queue_privilege('ENQUEUE', 'orders_q', 'producer');
		SELECT aq.grant_queue_privilege('DEQUEUE', 'orders_q', 'consumer', grant_option => true);
		SELECT aq.grant_queue_privilege('ALL', 'text_q', 'producer');
		SELECT aq.grant_queue_privilege('DEQUEUE', 'json_q', 'PUBLIC');
		SELECT aq.grant_queue_privilege('ALL', 'app_q', 'consumer');
		-- a queue table owned by another role than the superuser who made it (before 0.4.0
		-- only superusers created queue tables: an owner was given by ALTER TABLE)
		ALTER TABLE app.app_qt OWNER TO app_owner;
	});
	# Since 0.4.0 its view is made with it; the view belongs to the queue table's owner, as
	# when that role creates the queue table itself.
	sql($db, q{ALTER VIEW app."aq$app_qt" OWNER TO app_owner}) unless $by_hand;
	my @messages = (
		[ 'orders_q', q{ROW(1, 'first order')::order_ot}, q{'order-1'} ],
		[ 'orders_q', q{ROW(2, 'second order')::order_ot}, 'NULL' ],
		[ 'text_q', q{'hello'::text}, 'NULL' ],
		[ 'json_q', q{'{"id": 42}'::jsonb}, q{'j'} ],
		[ 'bytes_q', q{'\xdeadbeef'::bytea}, 'NULL' ],
		[ 'state_q', q{'new'::state_et}, 'NULL' ],
		[ 'app_q', q{7}, 'NULL' ]);
	my %table = (orders_q => 'orders_qt', text_q => 'text_qt', json_q => 'json_qt', bytes_q => 'bytes_qt',
		state_q => 'state_qt', app_q => 'app.app_qt');
	for my $m (@messages)
	{
		my ($queue, $payload, $corrid) = @$m;
		if ($by_hand)
		{
			sql($db, qq{
				INSERT INTO $table{$queue} (q_id, enq_time, corrid, user_data)
				SELECT queue_id, now(), $corrid, $payload FROM aq.queues WHERE queue_name = '$queue'});
		}
		else
		{
			sql($db, qq{SELECT aq.enqueue('$queue', $payload, aq.message_properties(correlation => $corrid))});
		}
	}
}

# EXECUTE grants on the admin functions, in the form each function has at $version: to a
# role, to a role WITH GRANT OPTION, and by that role on to another.
sub function_grants
{
	my ($db, $version) = @_;
	my $create_queue = $version lt '0.4.0'
	  ? 'aq.create_queue(text, text, integer, interval, interval, text)'
	  : 'aq.create_queue(text, text, integer, interval, interval, text, text)';
	my $purge = $version lt '0.4.0'
	  ? 'aq.purge_queue_table(text, text)'
	  : 'aq.purge_queue_table(text, aq.purge_condition)';
	my $create_queue_table = $version lt '0.6.0'
	  ? 'aq.create_queue_table(text, regtype, text, text, text)'
	  : $version lt '0.7.0'
	  ? 'aq.create_queue_table(text, regtype, text, text, text, boolean, text)'
	  : 'aq.create_queue_table(text, regtype, text, text, text, boolean, text, integer)';
	sql($db, qq{
		GRANT EXECUTE ON FUNCTION $create_queue_table, $create_queue,
		      aq.drop_queue_table(text, boolean), aq.start_queue(text, boolean, boolean),
		      aq.stop_queue(text, boolean, boolean), aq.drop_queue(text),
		      aq.grant_queue_privilege(text, text, text, boolean) TO app_owner;
		GRANT EXECUTE ON FUNCTION $purge, aq.revoke_queue_privilege(text, text, text),
		      aq.alter_queue(text, integer, interval, interval, text) TO app_admin WITH GRANT OPTION;
		SET ROLE app_admin;
		GRANT EXECUTE ON FUNCTION $purge, aq.revoke_queue_privilege(text, text, text) TO auditor;
		RESET ROLE;
	});
}

# 0.2.0: commit settings at database and role level.
sub commit_settings
{
	my ($db) = @_;
	sql($db, qq{
		ALTER DATABASE $db SET aq.commit_logging = 'batch';
		ALTER ROLE producer IN DATABASE $db SET aq.commit_write = 'batch,nowait';
	});
}

# 0.3.0: fast-ingest tables, with rows.
sub fast_ingest
{
	my ($db) = @_;
	sql($db, q{
		SELECT aq.enable_fast_ingest('sensor_readings');
		SELECT aq.enable_fast_ingest('device_log');
	});
	sql($db, q{
		INSERT /*+ MEMOPTIMIZE_WRITE */ INTO sensor_readings SELECT i, 'r' || i FROM generate_series(1, 100) i;
		SELECT aq.write_end('30 s');
	});
}

# 0.4.0: a priority queue table created by its owner, exception queues, more grants.
sub queues_040
{
	my ($db) = @_;
	sql($db, q{
		SET ROLE app_owner;
		SELECT aq.create_queue_table('prio_qt', 'jsonb', sort_list => 'priority,enq_time');
		SELECT aq.create_queue('prio_q', 'prio_qt', max_retries => 2);
		SELECT aq.create_queue('prio_errors', 'prio_qt', queue_type => 'exception_queue');
		SELECT aq.start_queue('prio_q');
		SELECT aq.start_queue('prio_errors', enqueue => false);
		SELECT aq.grant_queue_privilege('ENQUEUE', 'prio_q', 'producer');
		SELECT aq.enqueue('prio_q', '{"p": 0}'::jsonb, aq.message_properties(priority => 0, exception_queue => 'prio_errors'));
		RESET ROLE;
		SELECT aq.create_queue('orders_errors', 'orders_qt', queue_type => 'exception_queue');
		SELECT aq.start_queue('aq$_orders_qt_e', enqueue => false);
	});
}

# ---------------------------------------------------------------- the upgraded databases

for my $db ('upgraded', 'repaired')
{
	sql($db, $user_objects);
	sql($db, q{CREATE EXTENSION aq VERSION '0.1.0'});
	queue_tables_010($db, 1);
	function_grants($db, '0.1.0') if $db eq 'upgraded';
	sql($db, q{ALTER EXTENSION aq UPDATE TO '0.2.0'});
	commit_settings($db);
	sql($db, q{ALTER EXTENSION aq UPDATE TO '0.3.0'});
	fast_ingest($db);
	sql($db, q{ALTER EXTENSION aq UPDATE TO '0.4.0'});
	if ($db eq 'repaired')
	{
		# What 0.4.0's 0.3.0 -> 0.4.0 script left: every queue table's view a member of the
		# extension, owned by the role that ran the upgrade; the grants on four admin
		# functions gone (the users made them again).
		sql($db, q{
			DO $$
			DECLARE t aq.queue_tables;
			BEGIN
				FOR t IN SELECT * FROM aq.queue_tables LOOP
					IF NOT EXISTS (SELECT FROM pg_depend d WHERE d.deptype = 'e' AND d.classid = 'pg_class'::regclass
					                  AND d.objid = format('%I.%I', t.table_schema, 'aq$' || t.queue_table)::regclass) THEN
						EXECUTE format('ALTER EXTENSION aq ADD VIEW %I.%I', t.table_schema, 'aq$' || t.queue_table);
					END IF;
					EXECUTE format('ALTER VIEW %I.%I OWNER TO %I', t.table_schema, 'aq$' || t.queue_table, current_user);
				END LOOP;
			END $$;
		});
		is(sql($db, q{SELECT count(*) FROM pg_depend WHERE deptype = 'e' AND classid = 'pg_class'::regclass
		                  AND objid::regclass::text LIKE '%aq$%'}),
			'6', 'repaired: the damage of the old 0.3.0 -> 0.4.0 script is in place');
		function_grants($db, '0.4.0');
	}
	my $kept = sql($db, q{
		SELECT has_function_privilege('app_owner', 'aq.create_queue_table(text, regtype, text, text, text)', 'EXECUTE')
		   AND has_function_privilege('app_owner', 'aq.create_queue(text, text, integer, interval, interval, text, text)', 'EXECUTE')});
	is($kept, 't', "$db: app_owner may still create queue tables and queues at 0.4.0");
	# (Without them the rest would not run: grant them again, as users had to.)
	sql($db, q{GRANT EXECUTE ON FUNCTION aq.create_queue_table(text, regtype, text, text, text),
	                aq.create_queue(text, text, integer, interval, interval, text, text) TO app_owner})
	  unless $kept eq 't';
	queues_040($db);
	sql($db, q{ALTER EXTENSION aq UPDATE TO '0.5.0'});
	is(sql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'aq'}), '0.5.0', "$db: at 0.5.0");
	sql($db, q{ALTER EXTENSION aq UPDATE TO '0.6.0'});
	is(sql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'aq'}), '0.6.0', "$db: at 0.6.0");
	sql($db, q{ALTER EXTENSION aq UPDATE TO '0.7.0'});
	is(sql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'aq'}), '0.7.0', "$db: at 0.7.0");
}

# ---------------------------------------------------------------- the fresh install

sql('fresh', $user_objects);
sql('fresh', q{CREATE EXTENSION aq});
is(sql('fresh', q{SELECT extversion = default_version FROM pg_extension, pg_available_extensions
                   WHERE extname = 'aq' AND name = 'aq'}), 't', 'fresh: at the default version');
is(sql('fresh', q{SELECT extversion FROM pg_extension WHERE extname = 'aq'}), '0.7.0', 'fresh: at 0.7.0');
queue_tables_010('fresh', 0);
function_grants('fresh', '0.7.0');
commit_settings('fresh');
fast_ingest('fresh');
queues_040('fresh');

# ---------------------------------------------------------------- comparisons

# aq's catalog (members, function ACLs and initial privileges among it) is compared by
# test/upgrade/catalog.sql below; these are the users' objects and data.
my %queries = (
	'queue catalog' => q{
		SELECT format('%s %s %s.%s %s %s %s %s %s %s %s', q.queue_name, q.queue_type, t.table_schema, t.queue_table,
		              t.payload_type, t.sort_list, q.max_retries, q.retry_delay, q.enqueue_enabled, q.dequeue_enabled,
		              q.comment)
		  FROM aq.queues q JOIN aq.queue_tables t USING (queue_table_id) ORDER BY 1},
	'messages' => q{
		SELECT queue || ' ' || coalesce(corr_id, '-') || ' ' || msg_priority || ' ' || user_data::text FROM "aq$orders_qt"
		UNION ALL SELECT queue || ' ' || user_data::text FROM "aq$text_qt"
		UNION ALL SELECT queue || ' ' || user_data::text FROM "aq$json_qt"
		UNION ALL SELECT queue || ' ' || user_data::text FROM "aq$bytes_qt"
		UNION ALL SELECT queue || ' ' || user_data::text FROM "aq$state_qt"
		UNION ALL SELECT queue || ' ' || user_data::text FROM app."aq$app_qt"
		UNION ALL SELECT queue || ' ' || msg_priority || ' ' || exception_queue || ' ' || user_data::text FROM "aq$prio_qt"
		ORDER BY 1},
	'fast ingest' => q{
		SELECT relid::regclass::text FROM aq.fast_ingest_tables
		UNION ALL SELECT 'sensor_readings ' || count(*) FROM sensor_readings
		ORDER BY 1},
	'settings' => q{
		SELECT coalesce(r.rolname, '(all)') || ' ' || s.setconfig::text
		  FROM pg_db_role_setting s LEFT JOIN pg_roles r ON r.oid = s.setrole
		 WHERE s.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
		 ORDER BY 1},
	'view owners' => q{
		SELECT c.oid::regclass::text || ' ' || c.relowner::regrole::text || ' ' || coalesce(c.relacl::text, '-')
		  FROM pg_class c WHERE c.relname LIKE 'aq$%' ORDER BY 1});

sub dump_schema
{
	my ($db) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'pg_dump', '--schema-only', '--no-comments', '-d', $node->connstr($db) ],
		'>', \$out, '2>', \$err)
	  or die "pg_dump $db failed: $err";
	# Normalise: pg_dump's own banner and \restrict key, and the blank lines.
	my @lines = grep { !/^--/ && !/^\\(un)?restrict / && !/^\s*$/ } split /\n/, $out;
	return join("\n", @lines) . "\n";
}

# aq's catalog, one line per item (test/upgrade/catalog.sql), and how it differs from the fresh
# install's (diff -u; empty when the same).
my $work = PostgreSQL::Test::Utils::tempdir();
sub catalog
{
	my ($db) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($db),
			'-f', 'test/upgrade/catalog.sql' ],
		'>', \$out, '2>', \$err)
	  or die "catalog.sql on $db failed: $err";
	die "catalog.sql on $db: $err" if $err ne '';
	return $out;
}
sub catalog_diff
{
	my ($db, $fresh_catalog) = @_;
	my ($fresh_file, $db_file) = ("$work/fresh.catalog", "$work/$db.catalog");
	PostgreSQL::Test::Utils::append_to_file($fresh_file, $fresh_catalog) unless -e $fresh_file;
	PostgreSQL::Test::Utils::append_to_file($db_file, catalog($db));
	my ($diff, $err) = ('', '');
	IPC::Run::run([ 'diff', '-u', '--label', 'fresh', '--label', $db, $fresh_file, $db_file ],
		'>', \$diff, '2>', \$err);
	die "diff failed: $err" if $err ne '';
	return $diff;
}

my $fresh_catalog = catalog('fresh');
like($fresh_catalog, qr/^extension\|aq\|0\.7\.0\|aq\|/m, 'fresh: catalog.sql describes aq 0.7.0');
like($fresh_catalog, qr/^function\|aq\.create_queue_table\(.*\|\{\w+=X\/\w+,app_owner=X\/\w+\}$/m,
	'fresh: catalog.sql shows the users\' grants on the admin functions');
cmp_ok(scalar(() = $fresh_catalog =~ /^(?:member|function|type|attribute|relation|policy|depend)\|/mg), '>', 500,
	'fresh: catalog.sql lists aq\'s objects');

my %fresh = map { $_ => sql('fresh', $queries{$_}) } keys %queries;
my $fresh_dump = dump_schema('fresh');
like($fresh_dump, qr/CREATE VIEW public\."aq\$orders_qt"/, 'fresh: pg_dump dumps the aq$ views');
like($fresh_dump, qr/GRANT ALL ON FUNCTION aq\.create_queue\(.*\) TO app_owner;/,
	'fresh: pg_dump dumps the grants of admin functions');

for my $db ('upgraded', 'repaired')
{
	my $diff = catalog_diff($db, $fresh_catalog);
	ok($diff eq '', "$db: aq's catalog (test/upgrade/catalog.sql) as on a fresh install")
	  or diag("catalog.sql, fresh install against $db:\n$diff");
	for my $what (sort keys %queries)
	{
		is(sql($db, $queries{$what}), $fresh{$what}, "$db: $what as on a fresh install");
	}
	is(dump_schema($db), $fresh_dump, "$db: pg_dump --schema-only as on a fresh install");
}

# What follows from membership: DROP EXTENSION refuses while the users' views need aq's
# catalog (it would have dropped member views with it), and drop_queue_table by the queue
# table's owner drops its table and view.
for my $db ('fresh', 'upgraded', 'repaired')
{
	my ($rc, $out, $err) = $node->psql($db, 'DROP EXTENSION aq');
	isnt($rc, 0, "$db: DROP EXTENSION aq refuses");
	like($err, qr/cannot drop extension aq because other objects depend on it/, "$db: because views depend on it");
	like($err, qr/view "aq\$orders_qt" depends on/, "$db: the aq\$ views are among them");
	sql($db, q{
		SET ROLE app_owner;
		SELECT aq.drop_queue_table('app_qt', force => true);
		RESET ROLE;
		SELECT aq.drop_queue_table('text_qt', force => true);
	});
	is(sql($db, q{SELECT count(*) FROM pg_class WHERE relname IN ('app_qt', 'aq$app_qt', 'text_qt', 'aq$text_qt')}),
		'0', "$db: drop_queue_table drops the queue table and its view (by its owner too)");
}

$node->stop;
done_testing();
