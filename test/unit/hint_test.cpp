// Unit tests of the MEMOPTIMIZE_WRITE hint scanner (src/ingest/hint.cpp): Boost.Test.
#define BOOST_TEST_MODULE hint
#include <boost/test/included/unit_test.hpp>

#include <cstring>

#include "ingest/hint.hpp"

namespace {
bool hinted(const char* sql) {
    return aq::ingest::has_memoptimize_write_hint(sql, std::strlen(sql));
}
}  // namespace

BOOST_AUTO_TEST_CASE(oracle_form_is_found) {
    BOOST_TEST(hinted("INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t VALUES (1)"));
    BOOST_TEST(hinted("insert /*+ memoptimize_write */ into t values (1)"));
    BOOST_TEST(hinted("  \n\tINSERT/*+MEMOPTIMIZE_WRITE*/INTO t VALUES (1)"));
    BOOST_TEST(hinted("INSERT /*+ APPEND MEMOPTIMIZE_WRITE PARALLEL(4) */ INTO t SELECT 1"));
    BOOST_TEST(hinted("INSERT /* note */ /*+ MEMOPTIMIZE_WRITE */ INTO t VALUES (1)"));
    BOOST_TEST(hinted("-- leading comment\nINSERT /*+ MEMOPTIMIZE_WRITE */ INTO t VALUES (1)"));
}

BOOST_AUTO_TEST_CASE(explain_and_prepare_reach_the_insert) {
    BOOST_TEST(hinted("EXPLAIN INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t VALUES (1)"));
    BOOST_TEST(hinted("EXPLAIN (ANALYZE, COSTS OFF) INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t VALUES (1)"));
    BOOST_TEST(hinted("explain analyze verbose insert /*+ MEMOPTIMIZE_WRITE */ into t values (1)"));
    BOOST_TEST(hinted("PREPARE p (int) AS INSERT /*+ MEMOPTIMIZE_WRITE */ INTO t VALUES ($1)"));
}

BOOST_AUTO_TEST_CASE(anything_else_is_not_the_hint) {
    BOOST_TEST(!hinted("INSERT INTO t VALUES (1)"));
    BOOST_TEST(!hinted("INSERT INTO /*+ MEMOPTIMIZE_WRITE */ t VALUES (1)"));      // after INTO
    BOOST_TEST(!hinted("INSERT /* MEMOPTIMIZE_WRITE */ INTO t VALUES (1)"));       // not a hint comment
    BOOST_TEST(!hinted("INSERT /*+ MEMOPTIMIZE_WRITES */ INTO t VALUES (1)"));      // another word
    BOOST_TEST(!hinted("INSERT /*+ NO_MEMOPTIMIZE_WRITE */ INTO t VALUES (1)"));
    BOOST_TEST(!hinted("INSERT INTO t VALUES ('/*+ MEMOPTIMIZE_WRITE */')"));      // in a string
    BOOST_TEST(!hinted("SELECT '/*+ MEMOPTIMIZE_WRITE */'"));
    BOOST_TEST(!hinted("UPDATE /*+ MEMOPTIMIZE_WRITE */ t SET a = 1"));
    BOOST_TEST(!hinted("INSERTED /*+ MEMOPTIMIZE_WRITE */"));
    BOOST_TEST(!hinted("INSERT /*+ MEMOPTIMIZE_WRITE"));                           // unterminated
    BOOST_TEST(!hinted(""));
    BOOST_TEST(!aq::ingest::has_memoptimize_write_hint(nullptr, 0));
}

BOOST_AUTO_TEST_CASE(length_bounds_the_statement) {
    // A multi-statement string: only the statement's own range counts.
    const char* text = "INSERT INTO a VALUES (1); INSERT /*+ MEMOPTIMIZE_WRITE */ INTO b VALUES (2)";
    BOOST_TEST(!aq::ingest::has_memoptimize_write_hint(text, 24));
    BOOST_TEST(aq::ingest::has_memoptimize_write_hint(text + 25, std::strlen(text + 25)));
    BOOST_TEST(!aq::ingest::has_memoptimize_write_hint("INSERT /*+ MEMOPTIMIZE_WRITE */", 20));
}
