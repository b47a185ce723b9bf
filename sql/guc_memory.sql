-- Parameter memory on PostgreSQL 16 and later (reliability C1: commit modes at the database
-- and role levels).  guc.c keeps string values and the extras of check hooks in its own memory
-- context there and pfree()s them: aq's check hooks allocated them with malloc() (15's rule),
-- so on 17 and 18 "ALTER ROLE ... SET aq.commit_write", which pg_dumpall writes for every role
-- setting, failed with "pfree called with invalid pointer", and so did every later change of
-- a value a hook had made.
CREATE ROLE aq_guc_role;
-- The check hook canonicalises the value (a new string) and makes an extra: both discarded
-- once ALTER ROLE has validated them.
ALTER ROLE aq_guc_role SET aq.commit_write = ' BATCH , NoWait ';
ALTER ROLE aq_guc_role SET aq.commit_write TO 'immediate,nowait';
ALTER ROLE aq_guc_role SET aq.commit_logging = 'batch';
DO $$ BEGIN
    EXECUTE format('ALTER ROLE aq_guc_role IN DATABASE %I SET aq.commit_wait = %L', current_database(), 'force_wait');
    EXECUTE format('ALTER DATABASE %I SET aq.commit_wait = %L', current_database(), 'nowait');
    EXECUTE format('ALTER DATABASE %I SET aq.commit_write = %L', current_database(), 'Write Batch');
END $$;
SELECT coalesce(r.rolname, '-') AS role, d.datname IS NOT NULL AS in_database, s.setting
  FROM pg_db_role_setting rs
  LEFT JOIN pg_roles r ON r.oid = rs.setrole
  LEFT JOIN pg_database d ON d.oid = rs.setdatabase,
       unnest(rs.setconfig) s(setting)
 WHERE (r.rolname = 'aq_guc_role' OR d.datname = current_database()) AND s.setting LIKE 'aq.%'
 ORDER BY 1, 2, 3;
-- In a session: values and extras replaced, restored by RESET and at the end of a transaction.
SET aq.commit_write = 'Batch ,  Wait';
SHOW aq.commit_write;
SET aq.commit_write = 'nowait';
SHOW aq.commit_write;
BEGIN;
SET LOCAL aq.commit_write = 'WRITE BATCH NOWAIT';
SET LOCAL aq.commit_wait = 'wait';
SHOW aq.commit_write;
COMMIT;
SHOW aq.commit_write;
RESET aq.commit_write;
SHOW aq.commit_write;
SET aq.commit_write = 'no such mode';
SHOW aq.commit_write;
-- The role's settings are applied (and freed) at login.
ALTER ROLE aq_guc_role LOGIN;
SELECT current_user AS admin \gset
\c - aq_guc_role
SHOW aq.commit_write;
SELECT commit_wait, forced FROM aq.commit_mode();
\c - :admin
DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I RESET aq.commit_wait', current_database());
    EXECUTE format('ALTER DATABASE %I RESET aq.commit_write', current_database());
    EXECUTE format('ALTER ROLE aq_guc_role IN DATABASE %I RESET ALL', current_database());
END $$;
ALTER ROLE aq_guc_role RESET ALL;
DROP ROLE aq_guc_role;
