-- aq 0.2.0: commit modes (Oracle's COMMIT_WAIT, COMMIT_LOGGING and COMMIT WRITE).
-- The parameters aq.commit_wait, aq.commit_logging, aq.commit_write, aq.commit_wait_level and
-- aq.batch_commit_window are defined by the library (shared_preload_libraries = 'aq');
-- these are the SQL entry points.
\echo Use "ALTER EXTENSION aq UPDATE TO '0.2.0'" to load this file. \quit

-- COMMIT WRITE [IMMEDIATE|BATCH] [WAIT|NOWAIT]: commits the current transaction in that mode.
-- Where PostgreSQL allows a procedure to commit (CALL at top level, or from a procedure);
-- elsewhere, SET LOCAL aq.commit_write = '...' and COMMIT.
CREATE PROCEDURE aq.commit(mode text DEFAULT NULL)
LANGUAGE c AS 'MODULE_PATHNAME', 'aq_commit';

-- The mode the current transaction would commit with now, and which setting decided each half.
CREATE FUNCTION aq.commit_mode(
    OUT commit_wait text,
    OUT commit_logging text,
    OUT synchronous_commit text,
    OUT wait_decided_by text,
    OUT logging_decided_by text,
    OUT forced boolean)
RETURNS record LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_commit_mode';

-- Every level (system, database, role, session, transaction) at which a commit parameter is set.
CREATE FUNCTION aq.commit_settings(
    OUT level text,
    OUT parameter text,
    OUT value text)
RETURNS SETOF record LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_commit_settings';

-- This session's last commit: its LSN, the WAL flushed so far, whether it is durable now and
-- whether it was when the commit returned, and the mode it ran with.
CREATE FUNCTION aq.last_commit(
    OUT commit_lsn pg_lsn,
    OUT flushed_lsn pg_lsn,
    OUT durable boolean,
    OUT durable_on_return boolean,
    OUT commit_wait text,
    OUT commit_logging text,
    OUT synchronous_commit text,
    OUT committed_at timestamptz)
RETURNS record LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_last_commit';

-- Commit counters of this session (or of all sessions since the server started):
-- commits acknowledged after / before their WAL was flushed, WAIT/BATCH group flushes,
-- NOWAIT/IMMEDIATE commits handed to aq's log writer, and its flushes (all_sessions only).
CREATE FUNCTION aq.commit_stats(
    all_sessions boolean DEFAULT false,
    OUT commits bigint,
    OUT waited bigint,
    OUT not_waited bigint,
    OUT batch_gathers bigint,
    OUT batch_followers bigint,
    OUT log_writer_requests bigint,
    OUT log_writer_flushes bigint)
RETURNS record LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_commit_stats';
