-- hardening 5: the extension lives in schema aq (aq.control: schema = aq).  A non-superuser
-- database owner's DROP SCHEMA public CASCADE must not remove it (nor its catalog), a schema aq
-- that someone else made is never adopted, and an installation from before 0.5.0 (in public,
-- schema aq one of its members) moves to schema aq on ALTER EXTENSION aq UPDATE.
SET client_min_messages = warning;
CREATE ROLE regress_aq_dbowner5 NOLOGIN;
CREATE DATABASE regress_aq_schema OWNER regress_aq_dbowner5;
\c regress_aq_schema
SET client_min_messages = warning;
CREATE EXTENSION aq;
SELECT extnamespace::regnamespace AS schema FROM pg_extension WHERE extname = 'aq';
SELECT aq.create_queue_table('s_qt', 'text');
SET ROLE regress_aq_dbowner5;
DROP SCHEMA public CASCADE;
DROP SCHEMA aq CASCADE;
RESET ROLE;
SELECT extname, extnamespace::regnamespace AS schema FROM pg_extension WHERE extname = 'aq';
SELECT queue_table FROM aq.queue_tables;

-- DROP EXTENSION leaves the (empty) schema; CREATE EXTENSION uses it again.
DROP EXTENSION aq;
SELECT nspname FROM pg_namespace WHERE nspname = 'aq';
CREATE EXTENSION aq;
-- A schema aq that another role made is refused.
DROP EXTENSION aq;
DROP SCHEMA aq;
CREATE SCHEMA aq AUTHORIZATION regress_aq_dbowner5;
-- (Without CONTEXT: PostgreSQL 18 adds the extension script's line to it.)
\set SHOW_CONTEXT never
CREATE EXTENSION aq;
\set SHOW_CONTEXT errors
DROP SCHEMA aq;

-- An installation made before 0.5.0: the extension in public and schema aq its member.
CREATE SCHEMA public AUTHORIZATION pg_database_owner;
CREATE EXTENSION aq VERSION '0.4.0';
UPDATE pg_depend SET refobjid = 'public'::regnamespace
 WHERE classid = 'pg_extension'::regclass AND objid = (SELECT oid FROM pg_extension WHERE extname = 'aq')
   AND refclassid = 'pg_namespace'::regclass;
UPDATE pg_extension SET extnamespace = 'public'::regnamespace WHERE extname = 'aq';
INSERT INTO pg_depend VALUES ('pg_namespace'::regclass, 'aq'::regnamespace, 0,
                              'pg_extension'::regclass, (SELECT oid FROM pg_extension WHERE extname = 'aq'), 0, 'e');
ALTER EXTENSION aq UPDATE;
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'aq') AS updated_to_default,
       extnamespace::regnamespace AS schema FROM pg_extension WHERE extname = 'aq';
SELECT count(*) AS schema_is_member FROM pg_depend
 WHERE classid = 'pg_namespace'::regclass AND objid = 'aq'::regnamespace AND deptype = 'e';
SET ROLE regress_aq_dbowner5;
DROP SCHEMA public CASCADE;
RESET ROLE;
SELECT extname, extnamespace::regnamespace AS schema FROM pg_extension WHERE extname = 'aq';

\c contrib_regression
DROP DATABASE regress_aq_schema WITH (FORCE);
DROP ROLE regress_aq_dbowner5;
