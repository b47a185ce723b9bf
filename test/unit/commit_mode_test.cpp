// Unit tests of src/commit/mode.* — the COMMIT_WRITE grammar and the resolution of the
// commit mode across levels.  Pure C++, no server needed.
#define BOOST_TEST_MODULE aq_commit_mode
#include <boost/test/included/unit_test.hpp>

#include <string>
#include <vector>

#include "commit/mode.hpp"

using namespace aq;
using namespace aq::commit;

namespace {

std::string sqlstate_of(const char* text) {
    try {
        parse_write_clause(text);
    } catch (const Error& e) {
        return e.sqlstate();
    }
    return "none";
}

std::string canonical(const char* text) {
    return format_write_clause(parse_write_clause(text));
}

Candidate wait_at(Level level, Wait w, uint64_t stamp = 1) {
    return {Origin::commit_wait, level, stamp, static_cast<int>(w)};
}
Candidate write_wait_at(Level level, Wait w, uint64_t stamp = 1) {
    return {Origin::commit_write, level, stamp, static_cast<int>(w)};
}
Candidate logging_at(Level level, Logging l, uint64_t stamp = 1) {
    return {Origin::commit_logging, level, stamp, static_cast<int>(l)};
}
Candidate sync_at(Level level, SyncCommit s) {
    return {Origin::synchronous_commit, level, 0, static_cast<int>(s)};
}

}  // namespace

BOOST_AUTO_TEST_CASE(write_clause_accepts_oracle_spellings) {
    BOOST_TEST(canonical("batch,nowait") == "batch,nowait");
    BOOST_TEST(canonical("NOWAIT, BATCH") == "batch,nowait");
    BOOST_TEST(canonical("  Batch   NoWait ") == "batch,nowait");
    BOOST_TEST(canonical("WRITE BATCH NOWAIT") == "batch,nowait");
    BOOST_TEST(canonical("write immediate wait") == "immediate,wait");
    BOOST_TEST(canonical("nowait") == "nowait");
    BOOST_TEST(canonical("immediate") == "immediate");
    BOOST_TEST(canonical("WRITE") == "");
    BOOST_TEST(canonical("") == "");
    BOOST_TEST(canonical(" , ") == "");
}

BOOST_AUTO_TEST_CASE(write_clause_rejects_bad_values_with_22023) {
    BOOST_TEST(sqlstate_of("bogus") == "22023");
    BOOST_TEST(sqlstate_of("wait nowait") == "22023");       // two wait halves
    BOOST_TEST(sqlstate_of("batch immediate") == "22023");   // two logging halves
    BOOST_TEST(sqlstate_of("batch write") == "22023");       // WRITE only leads
    BOOST_TEST(sqlstate_of("force_wait") == "22023");        // COMMIT_WAIT only
    BOOST_TEST(sqlstate_of("batch;nowait") == "22023");
    try {
        parse_write_clause("sometimes");
        BOOST_FAIL("no error");
    } catch (const Error& e) {
        BOOST_TEST(e.detail().find("sometimes") != std::string::npos);
        BOOST_TEST(e.hint().find("BATCH") != std::string::npos);  // lists the valid words
        BOOST_TEST(e.hint().find("NOWAIT") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(nothing_set_leaves_synchronous_commit_alone) {
    auto d = resolve({sync_at(Level::default_level, SyncCommit::on)}, {}, SyncCommit::on);
    BOOST_TEST(!d.aq_decides_wait);
    BOOST_TEST((d.wait == Wait::wait && d.sync == SyncCommit::on && d.logging == Logging::immediate));
    d = resolve({sync_at(Level::system, SyncCommit::off)}, {}, SyncCommit::on);
    BOOST_TEST((d.wait == Wait::nowait && d.sync == SyncCommit::off && !d.aq_decides_wait));
}

BOOST_AUTO_TEST_CASE(most_specific_level_wins) {
    auto d = resolve({wait_at(Level::system, Wait::nowait), wait_at(Level::session, Wait::wait),
                      sync_at(Level::default_level, SyncCommit::on)},
                     {}, SyncCommit::on);
    BOOST_TEST((d.wait == Wait::wait && d.wait_from->level == Level::session));
    d = resolve({wait_at(Level::database, Wait::wait), wait_at(Level::transaction, Wait::nowait),
                 sync_at(Level::default_level, SyncCommit::on)},
                {}, SyncCommit::on);
    BOOST_TEST((d.wait == Wait::nowait && d.sync == SyncCommit::off));
    auto l = resolve({sync_at(Level::default_level, SyncCommit::on)},
                     {logging_at(Level::role, Logging::batch), logging_at(Level::database, Logging::immediate)},
                     SyncCommit::on);
    BOOST_TEST((l.logging == Logging::batch && l.logging_from->level == Level::role));
}

BOOST_AUTO_TEST_CASE(force_wait_at_any_level_overrides_everything) {
    for (Level force_level : {Level::system, Level::database, Level::role, Level::session, Level::transaction}) {
        auto d = resolve({wait_at(force_level, Wait::force_wait), wait_at(Level::transaction, Wait::nowait, 9),
                          write_wait_at(Level::transaction, Wait::nowait, 10),
                          sync_at(Level::transaction, SyncCommit::off)},
                         {}, SyncCommit::on);
        BOOST_TEST(d.forced);
        BOOST_TEST((d.wait == Wait::wait && d.sync == SyncCommit::on));
        BOOST_TEST((d.wait_from->level == force_level));
    }
    // The least specific forcing level is the one reported.
    auto d = resolve({wait_at(Level::session, Wait::force_wait), wait_at(Level::system, Wait::force_wait),
                      sync_at(Level::default_level, SyncCommit::on)},
                     {}, SyncCommit::on);
    BOOST_TEST((d.wait_from->level == Level::system));
}

BOOST_AUTO_TEST_CASE(at_one_level_aq_beats_synchronous_commit_and_the_later_aq_value_wins) {
    auto d = resolve({wait_at(Level::session, Wait::wait), sync_at(Level::session, SyncCommit::off)}, {},
                     SyncCommit::on);
    BOOST_TEST((d.wait == Wait::wait && d.aq_decides_wait));
    // synchronous_commit more specific than aq's value: PostgreSQL's own setting rules.
    d = resolve({wait_at(Level::system, Wait::wait), sync_at(Level::session, SyncCommit::off)}, {}, SyncCommit::on);
    BOOST_TEST((d.wait == Wait::nowait && !d.aq_decides_wait && d.sync == SyncCommit::off));
    // commit_write set after commit_wait at the same level: commit_write wins, and vice versa.
    d = resolve({wait_at(Level::session, Wait::wait, 1), write_wait_at(Level::session, Wait::nowait, 2),
                 sync_at(Level::default_level, SyncCommit::on)},
                {}, SyncCommit::on);
    BOOST_TEST((d.wait == Wait::nowait && d.wait_from->origin == Origin::commit_write));
    d = resolve({wait_at(Level::session, Wait::wait, 3), write_wait_at(Level::session, Wait::nowait, 2),
                 sync_at(Level::default_level, SyncCommit::on)},
                {}, SyncCommit::on);
    BOOST_TEST((d.wait == Wait::wait && d.wait_from->origin == Origin::commit_wait));
}

BOOST_AUTO_TEST_CASE(wait_never_weakens_synchronous_commit) {
    auto d = resolve({wait_at(Level::session, Wait::wait), sync_at(Level::system, SyncCommit::remote_apply)}, {},
                     SyncCommit::on);
    BOOST_TEST((d.sync == SyncCommit::remote_apply));
    d = resolve({wait_at(Level::session, Wait::wait), sync_at(Level::system, SyncCommit::off)}, {},
                SyncCommit::remote_write);
    BOOST_TEST((d.sync == SyncCommit::remote_write));  // aq.commit_wait_level
    d = resolve({wait_at(Level::session, Wait::wait), sync_at(Level::system, SyncCommit::local)}, {},
                SyncCommit::on);
    BOOST_TEST((d.sync == SyncCommit::on));
    // synchronous_commit only at its default ('on'): aq.commit_wait_level alone says what WAIT means.
    d = resolve({wait_at(Level::session, Wait::wait), sync_at(Level::default_level, SyncCommit::on)}, {},
                SyncCommit::local);
    BOOST_TEST((d.sync == SyncCommit::local));
    d = resolve({wait_at(Level::system, Wait::force_wait), sync_at(Level::default_level, SyncCommit::on)}, {},
                SyncCommit::remote_write);
    BOOST_TEST((d.sync == SyncCommit::remote_write));
    // NOWAIT never waits for a standby.
    d = resolve({wait_at(Level::session, Wait::nowait), sync_at(Level::system, SyncCommit::remote_apply)}, {},
                SyncCommit::on);
    BOOST_TEST((d.sync == SyncCommit::off));
}

BOOST_AUTO_TEST_CASE(describe_names_parameter_value_and_level) {
    auto d = resolve({wait_at(Level::system, Wait::force_wait), sync_at(Level::default_level, SyncCommit::on)},
                     {logging_at(Level::transaction, Logging::batch)}, SyncCommit::on);
    BOOST_TEST(describe_wait(d.wait_from) == "aq.commit_wait = force_wait (system)");
    BOOST_TEST(describe_logging(d.logging_from) == "aq.commit_logging = batch (transaction)");
    BOOST_TEST(describe_logging(std::nullopt) == "default");
}
