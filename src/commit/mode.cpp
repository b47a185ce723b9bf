// See mode.hpp for the protocol.
#include "commit/mode.hpp"

#include <algorithm>
#include <cctype>

namespace aq::commit {

const char* name(Wait w) {
    switch (w) {
        case Wait::wait: return "wait";
        case Wait::nowait: return "nowait";
        case Wait::force_wait: return "force_wait";
    }
    return "?";
}

const char* name(Logging l) {
    return l == Logging::batch ? "batch" : "immediate";
}

const char* name(Level l) {
    switch (l) {
        case Level::default_level: return "default";
        case Level::system: return "system";
        case Level::database: return "database";
        case Level::role: return "role";
        case Level::session: return "session";
        case Level::transaction: return "transaction";
    }
    return "?";
}

const char* name(SyncCommit s) {
    switch (s) {
        case SyncCommit::off: return "off";
        case SyncCommit::local: return "local";
        case SyncCommit::remote_write: return "remote_write";
        case SyncCommit::on: return "on";
        case SyncCommit::remote_apply: return "remote_apply";
    }
    return "?";
}

const char* name(Origin o) {
    switch (o) {
        case Origin::commit_wait: return "aq.commit_wait";
        case Origin::commit_logging: return "aq.commit_logging";
        case Origin::commit_write: return "aq.commit_write";
        case Origin::synchronous_commit: return "synchronous_commit";
    }
    return "?";
}

namespace {

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

[[noreturn]] void bad_clause(std::string_view text, const std::string& why) {
    throw Error(sqlstate::invalid_parameter_value,
                "invalid commit write mode \"" + std::string(text) + "\"", why,
                "Valid values combine IMMEDIATE or BATCH with WAIT or NOWAIT, e.g. 'batch,nowait', "
                "'immediate', 'nowait' or 'WRITE BATCH NOWAIT'; an omitted half takes its default "
                "(IMMEDIATE, WAIT).");
}

}  // namespace

WriteClause parse_write_clause(std::string_view text) {
    WriteClause clause;
    std::vector<std::string_view> words;
    size_t i = 0;
    while (i < text.size()) {
        auto c = static_cast<unsigned char>(text[i]);
        if (c == ',' || std::isspace(c)) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < text.size() && text[j] != ',' && !std::isspace(static_cast<unsigned char>(text[j]))) j++;
        words.push_back(text.substr(i, j - i));
        i = j;
    }
    for (size_t k = 0; k < words.size(); k++) {
        auto w = words[k];
        if (iequals(w, "write")) {
            if (k != 0) bad_clause(text, "WRITE may only lead the clause.");
            continue;
        }
        std::optional<Wait> wait;
        std::optional<Logging> logging;
        if (iequals(w, "wait")) wait = Wait::wait;
        else if (iequals(w, "nowait")) wait = Wait::nowait;
        else if (iequals(w, "immediate")) logging = Logging::immediate;
        else if (iequals(w, "batch")) logging = Logging::batch;
        else if (iequals(w, "force_wait"))
            bad_clause(text, "FORCE_WAIT is a value of aq.commit_wait only, as in Oracle.");
        else
            bad_clause(text, "\"" + std::string(w) + "\" is not IMMEDIATE, BATCH, WAIT or NOWAIT.");
        if ((wait && clause.wait) || (logging && clause.logging))
            bad_clause(text, "Each half (IMMEDIATE|BATCH, WAIT|NOWAIT) may be given once.");
        if (wait) clause.wait = wait;
        if (logging) clause.logging = logging;
    }
    return clause;
}

std::string format_write_clause(const WriteClause& clause) {
    std::string out;
    if (clause.logging) out = name(*clause.logging);
    if (clause.wait) {
        if (!out.empty()) out += ',';
        out += name(*clause.wait);
    }
    return out;
}

namespace {

// Most specific level first; at equal level aq's parameters before synchronous_commit,
// then the later stamp.
bool outranks(const Candidate& a, const Candidate& b) {
    if (a.level != b.level) return a.level > b.level;
    bool a_aq = a.origin != Origin::synchronous_commit;
    bool b_aq = b.origin != Origin::synchronous_commit;
    if (a_aq != b_aq) return a_aq;
    return a.stamp > b.stamp;
}

std::optional<Candidate> winner(const std::vector<Candidate>& candidates) {
    std::optional<Candidate> best;
    for (const auto& c : candidates)
        if (!best || outranks(c, *best)) best = c;
    return best;
}

}  // namespace

Decision resolve(const std::vector<Candidate>& wait_candidates,
                 const std::vector<Candidate>& logging_candidates, SyncCommit wait_level) {
    Decision d;
    SyncCommit current = SyncCommit::on;
    bool current_is_set = false;  // synchronous_commit set somewhere, not just its default
    for (const auto& c : wait_candidates)
        if (c.origin == Origin::synchronous_commit) {
            current = static_cast<SyncCommit>(c.value);
            current_is_set = c.level != Level::default_level;
        }
    // WAIT means aq.commit_wait_level, or a stronger synchronous_commit that someone set.
    SyncCommit waiting = current_is_set && current != SyncCommit::off ? std::max(wait_level, current) : wait_level;

    // FORCE_WAIT anywhere: report the least specific level that forces (the one that rules).
    std::optional<Candidate> force;
    for (const auto& c : wait_candidates)
        if (c.origin == Origin::commit_wait && static_cast<Wait>(c.value) == Wait::force_wait &&
            (!force || c.level < force->level))
            force = c;

    if (force) {
        d.wait = Wait::wait;
        d.forced = true;
        d.aq_decides_wait = true;
        d.sync = waiting;
        d.wait_from = force;
    } else if (auto best = winner(wait_candidates); !best) {
        d.wait = Wait::wait;
        d.sync = current;
    } else if (best->origin == Origin::synchronous_commit) {
        d.sync = current;
        d.wait = current == SyncCommit::off ? Wait::nowait : Wait::wait;
        d.wait_from = best;
    } else {
        d.aq_decides_wait = true;
        d.wait = static_cast<Wait>(best->value) == Wait::nowait ? Wait::nowait : Wait::wait;
        d.sync = d.wait == Wait::nowait ? SyncCommit::off : waiting;
        d.wait_from = best;
    }

    if (auto best = winner(logging_candidates)) {
        d.logging = static_cast<Logging>(best->value);
        d.logging_from = best;
    }
    return d;
}

std::string describe_wait(const std::optional<Candidate>& from) {
    if (!from) return "default";
    const char* value = from->origin == Origin::synchronous_commit ? name(static_cast<SyncCommit>(from->value))
                                                                    : name(static_cast<Wait>(from->value));
    return std::string(name(from->origin)) + (from->origin == Origin::commit_write ? " gives " : " = ") + value +
           " (" + name(from->level) + ")";
}

std::string describe_logging(const std::optional<Candidate>& from) {
    if (!from) return "default";
    return std::string(name(from->origin)) + (from->origin == Origin::commit_write ? " gives " : " = ") +
           name(static_cast<Logging>(from->value)) + " (" + name(from->level) + ")";
}

}  // namespace aq::commit
