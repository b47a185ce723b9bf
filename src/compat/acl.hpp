// Privilege and ownership checks, across the supported server versions (15, 17, 18).
//
// 16 replaced the per-catalog pg_<catalog>_aclcheck / pg_<catalog>_ownercheck functions by
// object_aclcheck / object_ownercheck, which take the catalog's OID.
#pragma once

extern "C" {
#include "postgres.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "utils/acl.h"
}

namespace aq::compat {

inline AclResult namespace_aclcheck(Oid namespace_oid, Oid role, AclMode mode) {
#if PG_VERSION_NUM >= 160000
    return object_aclcheck(NamespaceRelationId, namespace_oid, role, mode);
#else
    return pg_namespace_aclcheck(namespace_oid, role, mode);
#endif
}

inline bool owns_relation(Oid relid, Oid role) {
#if PG_VERSION_NUM >= 160000
    return object_ownercheck(RelationRelationId, relid, role);
#else
    return pg_class_ownercheck(relid, role);
#endif
}

}  // namespace aq::compat
