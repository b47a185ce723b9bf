// Who a message of a queue table that stores each message once is for (once_walk.hpp, 3): its
// recipient list, its subscribers' rules, or every subscriber.
//
// Protocol.
//  1. Before the enqueue writes its rows (resolve): a message whose recipient_list names consumers
//     is for exactly them, each once (deliveries::recipients_of), subscribers or not.  The others
//     are for the queue's subscribers, read under the latest snapshot (add_subscriber's SHARE lock
//     waits for the enqueues in progress, and this one holds ROW EXCLUSIVE on the queue table from
//     before: a subscriber this read misses subscribed after every message here, by its
//     since_msgid).  None: the enqueue fails (55000, ORA-24033 analogue).  When no subscriber has a
//     rule, their list stays NULL — every subscriber that subscribed before the message.  When
//     one has, each message gets its list: the subscribers without a rule and those whose rule
//     holds on it; an empty one fails the enqueue as above.  A rule is evaluated as in the fan-out
//     (deliveries.hpp, 1): by one statement per rule and enqueue over the messages' columns as their
//     rows will hold them (their msgids drawn from the table's sequence first, in order), prepared
//     once per rule text (condition.hpp), run as the queue table's owner with search_path pinned
//     and restricted (base/run_as.hpp).  The list goes into the rows (the column recipients) by the
//     multi-insert (bulk_enqueue.hpp); the statement path (a table with triggers, rules, row-level
//     security or columns of its own, which no dequeue reads either) refuses lists and rules (0A000).
//  2. After the rows (reach): the scan floor of every consumer a list names comes down to the
//     messages, and, when a list is NULL, every subscriber's (scan_floor.hpp), before the commit.
// PostgreSQL-side code: call inside base::call, with an SPI connection.
#pragma once

extern "C" {
#include "postgres.h"
#include "utils/array.h"
}

#include "queue/bulk_enqueue.hpp"
#include "queue/catalog.hpp"

namespace aq::queue::audience {

// The queue's subscribers, read under the latest snapshot (1), palloc'd.
struct Subscribers {
    int count = 0;
    char** names = nullptr;
    char** rules = nullptr;  // nullptr: no rule
    bool any_rule = false;
};
Subscribers read_subscribers(int32 queue_id);

struct Resolved {
    Datum* lists = nullptr;  // per message: its recipients (text[]); nullptr: every one NULL
    bool* nulls = nullptr;
    Datum* msgids = nullptr;  // drawn for the rules (nullptr: the insert draws them)
    bool listed = false;      // some message has a list
    bool unlisted = false;    // some message has none (for every subscriber)
    // The subscribers read (under the insert's lock: no other can subscribe before the commit), for
    // reach() to lower their floors.
    int subscriber_count = 0;
    char** subscribers = nullptr;
};

// 1.  request: the enqueue as the multi-insert will write it (payloads, properties, enq_time);
// payloads: the same as an array (a rule's statement reads it).  Fills *out.
void resolve(const QueueInfo& q, const char* queue_name, const BulkEnqueue& request, ArrayType* payloads,
             Resolved* out);

// 2.  After the multi-insert wrote what resolve() found, msgids[0 .. count) (a message for nobody
// fails here, with its msgid).
void reach(const QueueInfo& q, const char* queue_name, const Resolved& resolved, const Datum* msgids, int count,
           TimestampTz enq_time, int32 lowest_priority);

// The statement path wrote the rows (no lists, no rules): refuses a recipient_list or a subscriber
// rule (0A000), fails a message for nobody, and lowers every subscriber's floor.
void reach_by_statement(const QueueInfo& q, const char* queue_name, ArrayType* properties, TimestampTz enq_time,
                        Datum first_msgid);

}  // namespace aq::queue::audience
