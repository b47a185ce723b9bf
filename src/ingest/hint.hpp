// Oracle's /*+ MEMOPTIMIZE_WRITE */ hint, found in a statement's text (pure C++, unit-tested).
//
// As in Oracle, the hint is a comment that starts with "/*+" and follows the INSERT keyword,
// possibly after other comments; its words are separated by blanks and compared without
// regard to case.  Anything else (the word in a string, in an ordinary comment, after the
// table name) is not the hint.
#pragma once

#include <cstddef>

namespace aq::ingest {

bool has_memoptimize_write_hint(const char* text, std::size_t length);

}  // namespace aq::ingest
