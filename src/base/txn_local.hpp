// The transaction-local map: what this backend remembers for the rest of one top-level
// transaction (the group id a grouped queue table's messages get, where a sweep resumes), in
// one mechanism instead of a fixed array per capability.
//
// Protocol
//  1. The map's memory is a child of TopTransactionContext, made at the transaction's first
//     enter(): PostgreSQL frees it at the transaction's end, whichever it is (commit, abort,
//     PREPARE, a FATAL exit).  Nothing of aq frees it, and no transaction-end handler is needed.
//  2. The map knows the local transaction id it was made in.  In any other transaction (the id
//     differs) it is stale: find() finds nothing and enter() makes a new one, without touching the
//     old pointer, which points into freed memory.  Outside a transaction (no local id) nothing is
//     kept: find() finds nothing and enter() gives a fresh entry that lives only until the next
//     call.
//  3. No entry is ever evicted: a key entered in a transaction is found, with the value last
//     stored, for the rest of it (subtransactions included: an entry made in a subtransaction that
//     rolled back stays; a value must be one that stays true, such as a group id already drawn).
//  4. Keys and values are trivially copyable.  Keys are hashed and compared byte by byte: build
//     them value-initialized (Key k{}; then the fields), so that padding is zero.
//
// The logic is txn_local_core.hpp's (pure C++, unit-tested against a fake environment:
// test/unit/txn_local_test.cpp); this file gives it PostgreSQL's.
//
// PostgreSQL-side code: enter() may raise out of memory (call it where a PostgreSQL error may be
// raised; no C++ object with a destructor may be alive in the frames it would unwind).
#pragma once

extern "C" {
#include "postgres.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
}

#include "base/txn_local_core.hpp"
#include "compat/proc.hpp"

namespace aq::base {

static_assert(InvalidLocalTransactionId == 0, "txn_local_core.hpp takes 0 for no transaction");

// PostgreSQL's environment: the local transaction id, and a dynahash in TopTransactionContext
// (invariant 1: freed with the transaction, whichever way it ends).
struct PgTxnEnv {
    using Table = HTAB*;
    template <class K, class V>
    struct Entry {
        K key;  // first: dynahash's key
        V value;
    };
    static std::uint32_t local_xid() { return compat::my_local_xid(); }
    template <class K, class V>
    static Table create(const char* name) {
        HASHCTL ctl{};
        ctl.keysize = sizeof(K);
        ctl.entrysize = sizeof(Entry<K, V>);
        ctl.hcxt = TopTransactionContext;
        return hash_create(name, 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
    }
    template <class K, class V>
    static V* find(Table t, const K& key) {
        auto* e = static_cast<Entry<K, V>*>(hash_search(t, &key, HASH_FIND, nullptr));
        return e ? &e->value : nullptr;
    }
    template <class K, class V>
    static V* enter(Table t, const K& key, bool* found) {
        auto* e = static_cast<Entry<K, V>*>(hash_search(t, &key, HASH_ENTER, found));
        return &e->value;
    }
};

template <class Key, class Value>
using TxnLocalMap = TxnLocalMapOn<Key, Value, PgTxnEnv>;

}  // namespace aq::base
