-- catalog.sql: the extension aq as the catalog holds it, one line per item, in a fixed order
-- and without OIDs, so that two databases can be compared with diff:
--
--   psql -X -At -v ON_ERROR_STOP=1 -d fresh -f test/upgrade/catalog.sql > fresh.txt
--
-- Run by test/t/015_upgrade.pl on a fresh install of the current version and on databases
-- upgraded to it from 0.1.0: the outputs must be identical.  Both databases are on the same
-- server, so the output may depend on the server version (17's MAINTAIN, deparsing); it must
-- not depend on OIDs, on the order objects were made in, or on the users' objects (queue
-- tables, their views) beyond what aq itself defines.  Lines:
--   extension   version, schema, relocatable, pg_dump's configuration tables and conditions
--   member      every member of the extension (pg_depend deptype 'e')
--   schema      aq's owner and ACL
--   function    every function and procedure in aq: arguments with names and defaults, result,
--               kind, language, volatility, parallel safety, strictness, security definer,
--               leakproof, cost, rows, support, proconfig, symbol or md5 of the body, owner, ACL
--   type        every type in aq (composite, base, shell, array): its fields and I/O functions
--   attribute   every column of aq's tables and views and every attribute of its composite
--               types: type, collation, not null, default, identity, generated, dropped, ACL
--   relation    every table, view, sequence and index in aq: kind, owner, persistence,
--               row-level security, options, ACL
--   sequence    its parameters and the column that owns it
--   constraint  check, primary key, unique, foreign key (pg_get_constraintdef)
--   index       pg_get_indexdef
--   view        pg_get_viewdef
--   policy      command, permissive, roles, USING and WITH CHECK
--   trigger     pg_get_triggerdef and whether it is enabled
--   cast        the casts to or from aq's types
--   comment     every comment on an object of aq (relations, columns, types, functions, ...)
--   init_priv   the extension's initial privileges (pg_init_privs), by object and column
--   depend      every dependency of aq's objects and their parts (columns' defaults,
--               constraints, indexes, rules, triggers, policies, array types, sequences)
\set ON_ERROR_STOP 1
\set QUIET 1
SET search_path = pg_catalog;   -- every regclass, regtype and regprocedure printed schema-qualified
SET extra_float_digits = 1;
\pset format unaligned
\pset tuples_only on

SELECT concat_ws('|', 'extension', e.extname, e.extversion, e.extnamespace::regnamespace, e.extrelocatable,
                 (SELECT string_agg(c.oid::regclass::text, ',' ORDER BY x.n)
                    FROM unnest(e.extconfig) WITH ORDINALITY x(relid, n) JOIN pg_class c ON c.oid = x.relid),
                 array_to_string(e.extcondition, ' ; '))
  FROM pg_extension e WHERE e.extname = 'aq';

SELECT concat_ws('|', 'member', i.type, i.identity)
  FROM pg_depend d, pg_identify_object(d.classid, d.objid, d.objsubid) i
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'aq')
 ORDER BY 1;

SELECT concat_ws('|', 'schema', n.nspname, n.nspowner::regrole, coalesce(n.nspacl::text, '(default)'))
  FROM pg_namespace n WHERE n.nspname = 'aq';

SELECT concat_ws('|', 'function', p.oid::regprocedure, pg_get_function_arguments(p.oid),
                 coalesce(pg_get_function_result(p.oid), '-'), p.prokind, l.lanname, p.provolatile, p.proparallel,
                 p.proisstrict, p.prosecdef, p.proleakproof, p.procost, p.prorows, p.prosupport, p.provariadic::regtype,
                 coalesce(array_to_string(p.proconfig, ','), '-'),
                 CASE WHEN l.lanname = 'c' THEN p.probin || ':' || p.prosrc ELSE 'md5:' || md5(p.prosrc) END,
                 p.proowner::regrole, coalesce(p.proacl::text, '(default)'))
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.pronamespace = 'aq'::regnamespace ORDER BY 1;

SELECT concat_ws('|', 'type', t.oid::regtype, t.typtype, t.typlen, t.typbyval, t.typalign, t.typstorage,
                 t.typcategory, t.typispreferred, t.typisdefined, t.typdelim, t.typrelid::regclass,
                 t.typelem::regtype, t.typarray::regtype, t.typinput::regprocedure, t.typoutput::regprocedure,
                 t.typreceive::regprocedure, t.typsend::regprocedure, t.typmodin, t.typmodout, t.typanalyze,
                 t.typsubscript, t.typnotnull, t.typbasetype::regtype, t.typtypmod, t.typndims, t.typcollation,
                 coalesce(t.typdefault, '-'), t.typowner::regrole, coalesce(t.typacl::text, '(default)'))
  FROM pg_type t WHERE t.typnamespace = 'aq'::regnamespace ORDER BY 1;

SELECT concat_ws('|', 'attribute', c.oid::regclass, c.relkind, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),
                 coalesce(co.collname, '-'), a.attnotnull, a.atthasdef,
                 coalesce(pg_get_expr(ad.adbin, ad.adrelid), '-'), a.attidentity, a.attgenerated, a.attisdropped,
                 a.attstorage, a.attndims,
                 coalesce(a.attacl::text, '-'))
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
  LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 0
  LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
 WHERE c.relnamespace = 'aq'::regnamespace AND c.relkind <> 'i'
 ORDER BY c.oid::regclass::text, a.attnum;

SELECT concat_ws('|', 'relation', c.oid::regclass, c.relkind, c.relowner::regrole, c.relpersistence,
                 c.relrowsecurity, c.relforcerowsecurity, c.relreplident, c.relhasrules, c.relispartition,
                 coalesce(am.amname, '-'), coalesce(array_to_string(c.reloptions, ','), '-'),
                 coalesce(c.relacl::text, '(default)'))
  FROM pg_class c LEFT JOIN pg_am am ON am.oid = c.relam
 WHERE c.relnamespace = 'aq'::regnamespace ORDER BY 1;

SELECT concat_ws('|', 'sequence', s.seqrelid::regclass, s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmax,
                 s.seqmin, s.seqcache, s.seqcycle,
                 (SELECT string_agg(pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid) || ' ' || d.deptype::text, ', ')
                    FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = s.seqrelid
                     AND d.refclassid = 'pg_class'::regclass))
  FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid
 WHERE c.relnamespace = 'aq'::regnamespace ORDER BY 1;

SELECT concat_ws('|', 'constraint', c.conrelid::regclass, c.conname, c.contype, c.condeferrable, c.condeferred,
                 c.convalidated, c.connoinherit, pg_get_constraintdef(c.oid))
  FROM pg_constraint c
 WHERE c.connamespace = 'aq'::regnamespace ORDER BY 1;

SELECT concat_ws('|', 'index', i.indrelid::regclass, i.indexrelid::regclass, i.indisunique, i.indisprimary,
                 i.indimmediate, i.indisreplident, pg_get_indexdef(i.indexrelid))
  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
 WHERE c.relnamespace = 'aq'::regnamespace ORDER BY 1;

SELECT concat_ws('|', 'view', c.oid::regclass, regexp_replace(pg_get_viewdef(c.oid), '\s+', ' ', 'g'))
  FROM pg_class c WHERE c.relnamespace = 'aq'::regnamespace AND c.relkind IN ('v', 'm') ORDER BY 1;

SELECT concat_ws('|', 'policy', p.polrelid::regclass, p.polname, p.polcmd, p.polpermissive,
                 (SELECT string_agg(CASE WHEN r = 0 THEN 'PUBLIC' ELSE r::regrole::text END, ',' ORDER BY 1)
                    FROM unnest(p.polroles) r),
                 regexp_replace(coalesce(pg_get_expr(p.polqual, p.polrelid), '-'), '\s+', ' ', 'g'),
                 regexp_replace(coalesce(pg_get_expr(p.polwithcheck, p.polrelid), '-'), '\s+', ' ', 'g'))
  FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
 WHERE c.relnamespace = 'aq'::regnamespace ORDER BY 1;

SELECT concat_ws('|', 'trigger', t.tgrelid::regclass, t.tgname, t.tgenabled, t.tgisinternal, pg_get_triggerdef(t.oid))
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = 'aq'::regnamespace AND NOT t.tgisinternal ORDER BY 1;

SELECT concat_ws('|', 'cast', c.castsource::regtype, c.casttarget::regtype,
                 CASE WHEN c.castfunc = 0 THEN '-' ELSE c.castfunc::regprocedure::text END, c.castcontext, c.castmethod)
  FROM pg_cast c
  JOIN pg_type s ON s.oid = c.castsource JOIN pg_type t ON t.oid = c.casttarget
 WHERE 'aq'::regnamespace IN (s.typnamespace, t.typnamespace) ORDER BY 1;

-- Comments on aq's objects: those whose identity (by pg_identify_object) is in schema aq.
SELECT concat_ws('|', 'comment', i.type, i.identity, d.description)
  FROM pg_description d, pg_identify_object(d.classoid, d.objoid, d.objsubid) i
 WHERE i.schema = 'aq' ORDER BY 1;

SELECT concat_ws('|', 'init_priv', i.type, i.identity, ip.initprivs::text)
  FROM pg_init_privs ip, pg_identify_object(ip.classoid, ip.objoid, ip.objsubid) i
 WHERE ip.privtype = 'e' ORDER BY 1;

-- Dependencies: of the extension's members and of every object that is part of one (depends on
-- it with deptype 'a' or 'i', recursively: columns' defaults, constraints, indexes, triggers,
-- policies, rewrite rules, array types, identity sequences, TOAST tables).  A user's objects
-- depend on aq's with deptype 'n' and are left out.  TOAST tables are named by OID: the number
-- is masked, as in the names of the foreign keys' internal triggers.
WITH RECURSIVE part(classid, objid) AS (
    SELECT d.classid, d.objid FROM pg_depend d
     WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
       AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'aq')
    UNION
    SELECT d.classid, d.objid FROM pg_depend d JOIN part p ON d.refclassid = p.classid AND d.refobjid = p.objid
     WHERE d.deptype IN ('a', 'i')
)
SELECT regexp_replace(concat_ws('|', 'depend', pg_describe_object(d.classid, d.objid, d.objsubid), d.deptype,
                                pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid)),
                      '(pg_toast_|RI_ConstraintTrigger_[ac]_)[0-9]+', '\1N', 'g')
  FROM pg_depend d JOIN part p ON p.classid = d.classid AND p.objid = d.objid
 ORDER BY 1;
