// Unit tests of the transaction-local map's protocol (src/base/txn_local_core.hpp) against a fake
// environment: a transaction counter and std::map tables.  Boost.Test.
#define BOOST_TEST_MODULE txn_local
#include <boost/test/included/unit_test.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/txn_local_core.hpp"

namespace {

// The fake: the running local transaction (0: none), and every table ever made (a transaction's
// end "frees" its table: it is marked dead, and the map must never touch it again).
struct FakeEnv {
    struct TableData {
        std::uint32_t lxid;
        bool dead = false;
        std::map<std::string, std::vector<char>> rows;  // key bytes -> value bytes
    };
    using Table = TableData*;
    static inline std::uint32_t running = 0;
    static inline std::vector<std::unique_ptr<TableData>> tables;
    static inline int touched_dead = 0;

    static void begin(std::uint32_t lxid) { running = lxid; }
    static void end() {
        for (auto& t : tables)
            if (t->lxid == running) t->dead = true;
        running = 0;
    }
    static std::uint32_t local_xid() { return running; }
    template <class K, class V>
    static Table create(const char*) {
        tables.push_back(std::make_unique<TableData>(TableData{running}));
        return tables.back().get();
    }
    template <class K>
    static std::string bytes(const K& k) { return std::string(reinterpret_cast<const char*>(&k), sizeof k); }
    template <class K, class V>
    static V* find(Table t, const K& key) {
        if (t->dead) touched_dead++;
        auto it = t->rows.find(bytes(key));
        return it == t->rows.end() ? nullptr : reinterpret_cast<V*>(it->second.data());
    }
    template <class K, class V>
    static V* enter(Table t, const K& key, bool* found) {
        if (t->dead) touched_dead++;
        auto [it, inserted] = t->rows.try_emplace(bytes(key), std::vector<char>(sizeof(V)));
        *found = !inserted;
        return reinterpret_cast<V*>(it->second.data());
    }
};

using Map = aq::base::TxnLocalMapOn<int, long, FakeEnv>;

}  // namespace

BOOST_AUTO_TEST_CASE(an_entry_lives_for_its_transaction) {
    Map m("test");
    FakeEnv::begin(1);
    bool found = true;
    long* v = m.enter(7, &found);
    BOOST_TEST(!found);
    BOOST_TEST(*v == 0);  // value-initialized
    *v = 42;
    BOOST_TEST(*m.find(7) == 42);
    BOOST_TEST(*m.enter(7, &found) == 42);
    BOOST_TEST(found);
    BOOST_TEST(m.find(8) == nullptr);
    FakeEnv::end();
}

BOOST_AUTO_TEST_CASE(never_evicts) {
    Map m("test");
    FakeEnv::begin(2);
    bool found;
    for (int k = 0; k < 10000; k++) *m.enter(k, &found) = k * 2L;
    for (int k = 0; k < 10000; k++) BOOST_TEST(*m.find(k) == k * 2L);
    FakeEnv::end();
}

BOOST_AUTO_TEST_CASE(another_transaction_finds_nothing_and_never_touches_the_old_table) {
    Map m("test");
    FakeEnv::begin(3);
    bool found;
    *m.enter(1, &found) = 11;
    FakeEnv::end();
    int before = FakeEnv::touched_dead;
    FakeEnv::begin(4);
    BOOST_TEST(m.find(1) == nullptr);
    long* v = m.enter(1, &found);
    BOOST_TEST(!found);
    BOOST_TEST(*v == 0);
    FakeEnv::end();
    BOOST_TEST(FakeEnv::touched_dead == before);
}

BOOST_AUTO_TEST_CASE(outside_a_transaction_nothing_is_kept) {
    Map m("test");
    bool found = true;
    long* v = m.enter(5, &found);
    BOOST_TEST(!found);
    *v = 9;
    BOOST_TEST(m.find(5) == nullptr);
    BOOST_TEST(*m.enter(5, &found) == 0);
    BOOST_TEST(!found);
}

BOOST_AUTO_TEST_CASE(forget_starts_a_new_table_in_the_same_transaction) {
    Map m("test");
    FakeEnv::begin(5);
    bool found;
    *m.enter(1, &found) = 11;
    m.forget();
    BOOST_TEST(m.find(1) == nullptr);
    long* v = m.enter(1, &found);
    BOOST_TEST(!found);
    BOOST_TEST(*v == 0);
    *v = 12;
    BOOST_TEST(*m.find(1) == 12);
    FakeEnv::end();
}
