// Multi-consumer queue tables: who receives a message, and when it is gone.
//
// Protocol.  A multi-consumer queue table keeps each message once, in the queue table, and one
// delivery row per recipient in its delivery table (aq$_<queue_table>_i): the message's id, the
// consumer's name, and the columns a dequeue orders, filters and retries by (q_id, priority,
// enq_time, delay, expiration, retry_count, exception_queue), copied from the message.
//  1. Fan-out.  After an enqueue has inserted its messages, deliver() writes their delivery rows
//     in the same transaction, as the queue table's owner (base/run_as.hpp): the enqueuer needs no
//     privilege on the delivery table.  A message with a recipient_list goes to exactly those
//     consumers (each once); any other message to every subscriber of the queue (aq.subscribers)
//     whose rule it matches.  A rule is a condition over the message (condition.hpp), prepared
//     once per rule text and evaluated as the owner with search_path pinned, as it was checked
//     when the subscriber was added.  A message that would reach nobody is an error (Oracle's
//     ORA-24033), so the enqueue fails as a whole.  Subscribers added later do not receive
//     messages enqueued before.
//  2. Consumption.  A dequeue with consumer_name claims that consumer's delivery rows exactly as a
//     single-consumer dequeue claims messages (queue_store.hpp): FOR UPDATE SKIP LOCKED, the row's
//     xmax is the claim, so concurrent sessions of one consumer never take the same message and
//     each consumer has its own attempts, retry delay and move to an exception queue
//     (retries.hpp, settler.hpp: the delivery table has the columns those statements update).
//  3. Removal.  After a remove dequeue deleted delivery rows, sweep() deletes, in the same
//     transaction and as the caller, those messages that no delivery row is left for.  Its
//     snapshot cannot see a delivery that another consumer is removing in a transaction still
//     running; when every remaining delivery of a message is claimed (xmax set), the message is
//     remembered and swept again by this backend's next sweep of the table in a later
//     transaction (at most 4096 remembered; after that, and when the backend exits first, the
//     message stays until aq.purge_queue_table).  Whichever of the last two consumers sweeps after
//     the other has committed removes the message; rollbacks only leave it in place.
//
// PostgreSQL-side code: call inside base::call, with an SPI connection.
#pragma once

extern "C" {
#include "postgres.h"
#include "utils/array.h"
}

namespace aq::queue::deliveries {

// The tables of one multi-consumer queue table, as a lookup found them.
struct Tables {
    Oid relid;           // the queue table (the messages)
    Oid delivery_relid;  // its delivery table
    Oid payload_type;
    Oid owner;
    int32 queue_id;
    const char* queue_name;
    const char* messages;    // qualified names
    const char* deliveries;
};

// After an enqueue inserted the messages ids[0 .. count): their delivery rows.  properties is
// the enqueue's aq.message_properties[] (nullptr: defaults), read for recipient_list.
void deliver(const Tables& t, const Datum* ids, int count, ArrayType* properties);

// After a remove dequeue deleted delivery rows of the messages ids[0 .. count): removes the
// messages that no delivery row is left for.
void sweep(const Tables& t, const Datum* ids, int count);

// Whether this database's aq objects have multi-consumer queue tables (those of 0.6.0 or later:
// the library may be newer than them until ALTER EXTENSION aq UPDATE).
bool available();

// A subscriber's rule, checked against the queue table relid (condition.hpp's errors).
void check_rule(Oid relid, const char* rule);

}  // namespace aq::queue::deliveries
