-- aq 0.5.0: hardening — every guarantee aq states holds at the edges a production database meets.
-- Each section below is one concern; keep them apart so that each can be read on its own.

\echo Use "ALTER EXTENSION aq UPDATE TO '0.5.0'" to load this file. \quit

-- ---------------------------------------------------------------- privileges

-- ---------------------------------------------------------------- objects users built (upgrade repairs)

-- ---------------------------------------------------------------- dequeue attempts

-- ---------------------------------------------------------------- fast ingest
