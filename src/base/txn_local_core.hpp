// The transaction-local map's logic (txn_local.hpp has the protocol), without PostgreSQL: the
// environment Env says which local transaction is running and holds the table, so that
// test/unit/txn_local_test.cpp can run the protocol against a fake one.  Env provides:
//   using Table;                                  a handle, default-constructed as "none"
//   static std::uint32_t local_xid();              0 outside a transaction
//   template <class K, class V> static Table create(const char* name);  a new table, this transaction's
//   template <class K, class V> static V* find(Table, const K&);
//   template <class K, class V> static V* enter(Table, const K&, bool* found);
#pragma once

#include <cstdint>
#include <type_traits>

namespace aq::base {

template <class Key, class Value, class Env>
class TxnLocalMapOn {
    static_assert(std::is_trivially_copyable_v<Key> && std::is_trivially_copyable_v<Value>,
                  "a transaction-local map holds plain data");

public:
    explicit constexpr TxnLocalMapOn(const char* name) : name_(name) {}

    // The value of key in this transaction, or nullptr.
    Value* find(const Key& key) {
        if (!current()) return nullptr;
        return Env::template find<Key, Value>(table_, key);
    }

    // The value of key in this transaction, value-initialized (*found false) if it was not there.
    Value* enter(const Key& key, bool* found) {
        if (!current()) {
            std::uint32_t now = Env::local_xid();
            if (now == 0) {  // outside a transaction (invariant 2)
                *found = false;
                outside_ = Value{};
                return &outside_;
            }
            table_ = Env::template create<Key, Value>(name_);  // the old table, if any, went with its transaction
            lxid_ = now;
        }
        Value* v = Env::template enter<Key, Value>(table_, key, found);
        if (!*found) *v = Value{};
        return v;
    }

    // Forgets this transaction's entries: the next enter() starts a new table (the old one goes
    // with its transaction's memory).
    void forget() {
        lxid_ = 0;
        table_ = typename Env::Table{};
    }

private:
    // True when table_ belongs to the running transaction (invariant 2).
    bool current() const {
        std::uint32_t now = Env::local_xid();
        return has_table() && now != 0 && lxid_ == now;
    }
    bool has_table() const { return lxid_ != 0; }

    const char* name_;
    typename Env::Table table_{};
    std::uint32_t lxid_ = 0;
    Value outside_{};
};

}  // namespace aq::base
