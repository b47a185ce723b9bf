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
// PostgreSQL-side code: enter() may raise out of memory (call it where a PostgreSQL error may be
// raised; no C++ object with a destructor may be alive in the frames it would unwind).
#pragma once

extern "C" {
#include "postgres.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
}

#include <type_traits>

#include "compat/proc.hpp"

namespace aq::base {

template <class Key, class Value>
class TxnLocalMap {
    static_assert(std::is_trivially_copyable_v<Key> && std::is_trivially_copyable_v<Value>,
                  "a transaction-local map holds plain data");

public:
    explicit constexpr TxnLocalMap(const char* name) : name_(name) {}

    // The value of key in this transaction, or nullptr.
    Value* find(const Key& key) {
        if (!current()) return nullptr;
        auto* e = static_cast<Entry*>(hash_search(htab_, &key, HASH_FIND, nullptr));
        return e ? &e->value : nullptr;
    }

    // The value of key in this transaction, value-initialized (*found false) if it was not there.
    Value* enter(const Key& key, bool* found) {
        if (!current()) {
            LocalTransactionId now = compat::my_local_xid();
            if (now == InvalidLocalTransactionId) {
                *found = false;
                outside_ = Value{};
                return &outside_;
            }
            HASHCTL ctl{};
            ctl.keysize = sizeof(Key);
            ctl.entrysize = sizeof(Entry);
            ctl.hcxt = TopTransactionContext;
            htab_ = hash_create(name_, 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
            lxid_ = now;
        }
        auto* e = static_cast<Entry*>(hash_search(htab_, &key, HASH_ENTER, found));
        if (!*found) e->value = Value{};
        return &e->value;
    }

private:
    struct Entry {
        Key key;  // first: dynahash's key
        Value value;
    };

    // True when htab_ belongs to the running transaction (invariant 2).
    bool current() const {
        LocalTransactionId now = compat::my_local_xid();
        return htab_ != nullptr && now != InvalidLocalTransactionId && lxid_ == now;
    }

    const char* name_;
    HTAB* htab_ = nullptr;
    LocalTransactionId lxid_ = InvalidLocalTransactionId;
    Value outside_{};
};

}  // namespace aq::base
