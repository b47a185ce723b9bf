// Commit modes: Oracle's COMMIT_WAIT and COMMIT_LOGGING, resolved across setting levels.
// Pure C++ (no PostgreSQL header): every rule here is unit-tested by test/unit/commit_mode_test.cpp.
//
// Protocol — how one transaction's commit mode is decided (once, at pre-commit):
//
//  * The wait half has candidates from aq.commit_wait, from the wait half of aq.commit_write
//    (an omitted half takes its default, WAIT) and from PostgreSQL's own synchronous_commit.
//    The logging half has candidates from aq.commit_logging and aq.commit_write only.
//    Each candidate carries the level it was set at:
//        default < system < database < role < session < transaction
//    and aq's parameters carry a stamp: the order in which the values were set in one process.
//  * FORCE_WAIT at any level gives WAIT.  Oracle: a FORCE_WAIT level overrides every lower
//    level; and since FORCE_WAIT is WAIT itself, any level that says it yields WAIT.  It also
//    overrides synchronous_commit — a user cannot escape it with SET synchronous_commit = off.
//  * Otherwise the most specific level wins.  At one level aq's parameters beat
//    synchronous_commit, and between aq's parameters the one set last wins.
//  * If synchronous_commit wins, aq leaves it alone.  If an aq parameter wins, WAIT runs the
//    commit with synchronous_commit = aq.commit_wait_level, or the current synchronous_commit
//    if someone set that (at any level) to something stronger: WAIT never weakens what
//    PostgreSQL was explicitly asked for.  NOWAIT runs it with off.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace aq::commit {

enum class Wait { wait, nowait, force_wait };
enum class Logging { immediate, batch };
// From least to most specific; the numeric order is the precedence order.
enum class Level { default_level, system, database, role, session, transaction };
// PostgreSQL's synchronous_commit, in its own order of strength.
enum class SyncCommit { off, local, remote_write, on, remote_apply };
// Where a candidate value comes from.
enum class Origin { commit_wait, commit_logging, commit_write, synchronous_commit };

const char* name(Wait);
const char* name(Logging);
const char* name(Level);
const char* name(SyncCommit);
const char* name(Origin);

// The parsed form of aq.commit_write and of aq.commit()'s argument.
struct WriteClause {
    std::optional<Wait> wait;        // never force_wait: COMMIT_WRITE cannot express it
    std::optional<Logging> logging;
    bool empty() const { return !wait && !logging; }
};

// Parses Oracle's COMMIT_WRITE value ('BATCH,NOWAIT', 'nowait', 'immediate, wait') and the
// clause of the COMMIT statement ('WRITE BATCH NOWAIT', 'WRITE'): words separated by commas
// or spaces, in any order and case, at most one per half, optionally led by WRITE.
// An empty or blank text is the empty clause.  Anything else: aq::Error 22023 listing the
// valid words.
WriteClause parse_write_clause(std::string_view text);
// The canonical spelling, e.g. "batch,nowait"; "" for the empty clause.
std::string format_write_clause(const WriteClause& clause);

// One value of one parameter at one level.  `value` holds a Wait, Logging or SyncCommit
// according to `origin` (aq.commit_write candidates are split into their two halves).
struct Candidate {
    Origin origin;
    Level level;
    uint64_t stamp;  // later set = larger; 0 for synchronous_commit
    int value;
};

struct Decision {
    Wait wait = Wait::wait;          // wait or nowait: the behaviour
    bool forced = false;             // a FORCE_WAIT decided it
    Logging logging = Logging::immediate;
    SyncCommit sync = SyncCommit::on;  // synchronous_commit the commit runs with
    bool aq_decides_wait = false;    // false: synchronous_commit decided; aq leaves it alone
    std::optional<Candidate> wait_from;     // nullopt: nothing set, the default
    std::optional<Candidate> logging_from;  // nullopt: the default, IMMEDIATE
};

// wait_candidates: commit_wait / commit_write / synchronous_commit candidates (exactly one
// synchronous_commit candidate: its current value at its level).  wait_level: what WAIT means
// (aq.commit_wait_level).
Decision resolve(const std::vector<Candidate>& wait_candidates,
                 const std::vector<Candidate>& logging_candidates, SyncCommit wait_level);

// Where a half came from: "aq.commit_wait = force_wait (system)", "synchronous_commit = off
// (session)", "aq.commit_write gives nowait (transaction)", or "default".
std::string describe_wait(const std::optional<Candidate>& from);
std::string describe_logging(const std::optional<Candidate>& from);

}  // namespace aq::commit
