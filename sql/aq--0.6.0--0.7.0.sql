-- aq 0.7.0: the upgrade from 0.6.0.  The schema of 0.7.0 is sql/aq--0.7.0.sql, the script a fresh
-- install runs; this script brings an installation of 0.6.0 to the same schema (test/t/015_upgrade.pl
-- compares the two).  A change of this release goes into both files.
\echo Use "ALTER EXTENSION aq UPDATE TO '0.7.0'" to load this file. \quit
