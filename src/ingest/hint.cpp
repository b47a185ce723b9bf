#include "ingest/hint.hpp"

#include <cctype>
#include <cstring>

namespace aq::ingest {

namespace {

struct Cursor {
    const char* p;
    const char* end;

    bool at(const char* s) const {
        std::size_t n = std::strlen(s);
        return std::size_t(end - p) >= n && std::memcmp(p, s, n) == 0;
    }
    void skip_blanks() {
        while (p < end && std::isspace(static_cast<unsigned char>(*p))) p++;
    }
    // Skips a "-- ..." or "/* ... */" comment (PostgreSQL's comments nest).
    void skip_comment() {
        if (at("--")) {
            while (p < end && *p != '\n') p++;
            return;
        }
        int depth = 0;
        while (p < end) {
            if (at("/*")) {
                depth++;
                p += 2;
            } else if (at("*/")) {
                p += 2;
                if (--depth == 0) return;
            } else {
                p++;
            }
        }
    }
};

bool is_word_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}

bool keyword_at(const Cursor& c, const char* word) {
    std::size_t n = std::strlen(word);
    if (std::size_t(c.end - c.p) < n || strncasecmp(c.p, word, n) != 0) return false;
    return c.p + n == c.end || !is_word_char(c.p[n]);
}

// Does the hint comment [from, to) name MEMOPTIMIZE_WRITE as one of its words?
bool names_memoptimize_write(const char* from, const char* to) {
    static const char word[] = "MEMOPTIMIZE_WRITE";
    const std::size_t n = sizeof word - 1;
    for (const char* p = from; p + n <= to; p++) {
        if (strncasecmp(p, word, n) != 0) continue;
        bool starts = p == from || !is_word_char(p[-1]);
        bool ends = p + n == to || !is_word_char(p[n]);
        if (starts && ends) return true;
    }
    return false;
}

}  // namespace

bool has_memoptimize_write_hint(const char* text, std::size_t length) {
    if (!text) return false;
    Cursor c{text, text + length};
    // Leading blanks and comments, then the INSERT keyword.
    for (;;) {
        c.skip_blanks();
        if (c.at("--") || (c.at("/*") && !c.at("/*+"))) {
            c.skip_comment();
            continue;
        }
        break;
    }
    // EXPLAIN [ANALYZE] [VERBOSE] [( ... )] and PREPARE name [( ... )] AS come before the INSERT.
    for (;;) {
        c.skip_blanks();
        if (c.at("--") || (c.at("/*") && !c.at("/*+"))) {
            c.skip_comment();
        } else if (c.at("(")) {
            int depth = 0;
            do {
                if (*c.p == '(') depth++;
                if (*c.p == ')') depth--;
                c.p++;
            } while (c.p < c.end && depth > 0);
        } else if (keyword_at(c, "explain") || keyword_at(c, "analyze") || keyword_at(c, "analyse") ||
                   keyword_at(c, "verbose")) {
            while (c.p < c.end && is_word_char(*c.p)) c.p++;
        } else if (keyword_at(c, "prepare")) {
            c.p += 7;
            while (c.p < c.end && !(keyword_at(c, "as") && std::isspace(static_cast<unsigned char>(c.p[-1])))) c.p++;
            if (c.p < c.end) c.p += 2;
        } else {
            break;
        }
    }
    if (!keyword_at(c, "insert")) return false;
    c.p += 6;
    // Between INSERT and the next word: comments, one of which may be the hint.
    for (;;) {
        c.skip_blanks();
        if (c.at("/*+")) {
            const char* start = c.p + 3;
            const char* close = start;
            while (close + 1 < c.end && !(close[0] == '*' && close[1] == '/')) close++;
            if (close + 1 >= c.end) return false;  // unterminated
            if (names_memoptimize_write(start, close)) return true;
            c.p = close + 2;
        } else if (c.at("/*") || c.at("--")) {
            c.skip_comment();
        } else {
            return false;
        }
    }
}

}  // namespace aq::ingest
