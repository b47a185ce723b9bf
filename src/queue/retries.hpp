// Dequeue attempts (Oracle's RETRY_COUNT / max_retries / retry_delay).
//
// Protocol.  Oracle counts an attempt when a transaction that dequeued a message (remove or
// locked mode) rolls back.  In PostgreSQL the rollback also undoes anything the transaction
// wrote, so the count is kept in this backend and written by a later transaction:
//   - every message a remove or locked dequeue returns is noted as CLAIMED, with the
//     subtransaction nesting level that claimed it;
//   - a subtransaction that commits hands its claims to its parent; one that aborts turns
//     them PENDING; the top transaction's commit forgets its claims, its abort turns them
//     PENDING;
//   - the next aq dequeue or enqueue of this backend (in READ COMMITTED) applies the
//     pending attempts first, in its own transaction, as the queue table's owner: one
//     UPDATE per queue adds 1 to retry_count, delays the message by the queue's retry_delay,
//     and moves it to its exception queue once retry_count exceeds max_retries.  The
//     applied entries become CLAIMED by that transaction, so if it rolls back they are
//     PENDING again (and its own dequeues are counted too).
// A message another transaction has locked meanwhile is skipped (it is being dequeued
// again).  Attempts noted by a session that ends before its next aq call are not counted.
// Plain data in TopMemoryContext; the transaction callbacks never allocate.
#pragma once

extern "C" {
#include "postgres.h"
}

namespace aq::queue::retries {

// A remove or locked dequeue returned this message (called from the executor's receiver).
// by_msgid: a dequeue by message id, which may remove a message this transaction locked
// before: the same attempt, noted once.
void note_claimed(int32 queue_id, int64 msgid, bool by_msgid);

bool any_pending();

// The pending attempts of one queue: their message ids (palloc'd int8 Datums in the current
// memory context), now CLAIMED by the current subtransaction.  Returns the queue id, or 0
// when nothing is pending.
int32 take_pending(Datum** msgids, int* count);

// Forgets every pending attempt (they could not be counted).
void discard_pending();

// Transaction callbacks (module.cpp).
void at_commit();
void at_abort();
void at_prepare();
void at_subtransaction_commit();
void at_subtransaction_abort();

}  // namespace aq::queue::retries
