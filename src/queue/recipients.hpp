// Recipient lists (message_properties.recipient_list): each consumer once, in the order of its
// first appearance, and a bounded number of names per message.
//
// Pure C++ (no PostgreSQL header, no allocation, nothing thrown): the caller passes the names and
// the scratch space, so the rule runs in PostgreSQL memory and is unit-tested on its own
// (test/unit/recipients_test.cpp).
#pragma once

#include <algorithm>
#include <cstring>

namespace aq::queue::recipients {

// Names one message may list (Oracle's limit of consumers of a queue).  More is 54000.
inline constexpr int max_names = 1024;

// The positions of the first occurrence of each distinct name of names[0 .. n), in ascending
// order, written to keep; returns how many.  scratch holds n ints.  O(n log n) comparisons.
inline int first_occurrences(const char* const* names, int n, int* scratch, int* keep) {
    for (int i = 0; i < n; i++) scratch[i] = i;
    // Equal names next to each other, each run in ascending position: its head is the first.
    std::sort(scratch, scratch + n, [names](int a, int b) {
        int c = std::strcmp(names[a], names[b]);
        return c != 0 ? c < 0 : a < b;
    });
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || std::strcmp(names[scratch[i - 1]], names[scratch[i]]) != 0) keep[kept++] = scratch[i];
    std::sort(keep, keep + kept);
    return kept;
}

}  // namespace aq::queue::recipients
