// A relation's storage identity, across the supported server versions (15, 17, 18).
//
// 16 renamed RelFileNode to RelFileLocator (rd_node.relNode is rd_locator.relNumber).
#pragma once

extern "C" {
#include "postgres.h"
#include "utils/rel.h"
}

namespace aq::compat {

// The relation's current file number (changes on TRUNCATE, VACUUM FULL, CLUSTER).
inline Oid relation_file_number(Relation rel) {
#if PG_VERSION_NUM >= 160000
    return rel->rd_locator.relNumber;
#else
    return rel->rd_node.relNode;
#endif
}

}  // namespace aq::compat
