// A relation's storage identity, across the supported server versions (15, 17, 18), and its name
// as SQL text.
//
// 16 renamed RelFileNode to RelFileLocator (rd_node.relNode is rd_locator.relNumber).
#pragma once

extern "C" {
#include "postgres.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
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

// The relation's schema-qualified, quoted name (palloc'd), for a statement built around it.
inline char* qualified_name(Relation rel) {
    return quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)), RelationGetRelationName(rel));
}

}  // namespace aq::compat
