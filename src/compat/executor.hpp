// Executor, table-AM and planner calls, across the supported server versions (15, 17, 18).
//
//  * 16 moved a range table entry's privileges (requiredPerms, checkAsUser, the column sets)
//    into a separate list of RTEPermissionInfo: ExecCheckRTPerms became ExecCheckPermissions
//    and ExecInitRangeTable takes both lists.  aq builds its range tables as RangeTable, which
//    carries both on every version.
//  * 16 added ExecInsertIndexTuples' onlySummarizing; 17 made getIdentitySequence take the
//    Relation; 18 added ExecInitRangeTable's unpruned relations, ExecGetRangeTableRelation's
//    isResultRel and index_beginscan's instrumentation, and moved EXPLAIN's property
//    functions to commands/explain_format.h.
#pragma once

extern "C" {
#include "postgres.h"
#include "access/genam.h"
#include "catalog/dependency.h"
#include "commands/explain.h"
#if PG_VERSION_NUM >= 180000
#include "commands/explain_format.h"
#endif
#include "executor/executor.h"
#include "nodes/parsenodes.h"
#include "parser/parse_relation.h"
#include "parser/parsetree.h"
#include "utils/rel.h"
}

namespace aq::compat {

// One relation as a statement's range table, with the privileges the statement needs.
struct RangeTable {
    List* entries;      // of RangeTblEntry
    List* permissions;  // of RTEPermissionInfo (NIL before 16: they live in the entries)
};

inline RangeTable relation_range_table(Relation rel, LOCKMODE lockmode, AclMode permissions, Bitmapset* inserted,
                                       Bitmapset* selected) {
    RangeTblEntry* rte = makeNode(RangeTblEntry);
    rte->rtekind = RTE_RELATION;
    rte->relid = RelationGetRelid(rel);
    rte->relkind = rel->rd_rel->relkind;
    rte->rellockmode = lockmode;
    RangeTable out{list_make1(rte), NIL};
#if PG_VERSION_NUM >= 160000
    RTEPermissionInfo* perm = addRTEPermissionInfo(&out.permissions, rte);
    perm->requiredPerms = permissions;
    perm->insertedCols = inserted;
    perm->selectedCols = selected;
#else
    rte->requiredPerms = permissions;
    rte->insertedCols = inserted;
    rte->selectedCols = selected;
#endif
    return out;
}

// Does the current user hold the privileges?  With raise, a missing one is the statement's
// 42501 instead of false.
inline bool check_permissions(const RangeTable& rt, bool raise) {
#if PG_VERSION_NUM >= 160000
    return ExecCheckPermissions(rt.entries, rt.permissions, raise);
#else
    return ExecCheckRTPerms(rt.entries, raise);
#endif
}

inline void init_range_table(EState* estate, const RangeTable& rt) {
#if PG_VERSION_NUM >= 180000
    Bitmapset* unpruned = nullptr;
    for (int i = 1; i <= list_length(rt.entries); i++) unpruned = bms_add_member(unpruned, i);
    ExecInitRangeTable(estate, rt.entries, rt.permissions, unpruned);
#elif PG_VERSION_NUM >= 160000
    ExecInitRangeTable(estate, rt.entries, rt.permissions);
#else
    ExecInitRangeTable(estate, rt.entries);
#endif
}

// The opened result relation rti of a ModifyTable being executed.
inline Relation result_relation(EState* estate, Index rti) {
#if PG_VERSION_NUM >= 180000
    return ExecGetRangeTableRelation(estate, rti, true);
#else
    return ExecGetRangeTableRelation(estate, rti);
#endif
}

// The role whose privileges apply to a query's range table entry (InvalidOid: the current
// user; a view's owner for the relations a view expands to).
inline Oid check_as_user(Query* query, RangeTblEntry* rte) {
#if PG_VERSION_NUM >= 160000
    if (rte->perminfoindex == 0) return InvalidOid;
    return getRTEPermissionInfo(query->rteperminfos, rte)->checkAsUser;
#else
    return rte->checkAsUser;
#endif
}

// Index entries for a newly inserted heap tuple (no conflict arbitration); the recheck list.
inline List* insert_index_tuples(ResultRelInfo* rri, TupleTableSlot* slot, EState* estate) {
#if PG_VERSION_NUM >= 160000
    return ExecInsertIndexTuples(rri, slot, estate, false, false, nullptr, NIL, false);
#else
    return ExecInsertIndexTuples(rri, slot, estate, false, false, nullptr, NIL);
#endif
}

inline IndexScanDesc index_begin_scan(Relation heap, Relation index, Snapshot snapshot, int nkeys) {
#if PG_VERSION_NUM >= 180000
    return index_beginscan(heap, index, snapshot, nullptr, nkeys, 0);
#else
    return index_beginscan(heap, index, snapshot, nkeys, 0);
#endif
}

// The sequence of an identity column (rel is open).
inline Oid identity_sequence(Relation rel, AttrNumber attnum) {
#if PG_VERSION_NUM >= 170000
    return getIdentitySequence(rel, attnum, false);
#else
    return getIdentitySequence(RelationGetRelid(rel), attnum, false);
#endif
}

}  // namespace aq::compat
