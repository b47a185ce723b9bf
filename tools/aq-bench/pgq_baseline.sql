-- pgq_baseline.sql: set-up of the PgQ baseline for aq-bench's queue workload (system "pgq").
--
-- PgQ 3.5 from Debian 12 (apt-get install postgresql-15-pgq3).  pgq.md next to this file
-- gives the producer, consumer, tick and drain statements, the measurements and the caveats.
--
-- Run it verbatim: it is ONE statement (a DO block; the functions inside are quoted with $$),
-- so PQexec or PQexecParams with no parameters, or psql -f, all take it; one transaction.
-- Run it as a SUPERUSER (pgq.control says superuser = true, and the helpers ANALYZE and
-- insert into pgq tables).
-- It is idempotent and it RESETS the queue: each run drops the queue 'aq_bench_pgq' with
-- every event and registration it holds and creates it empty, so every measured run starts
-- from nothing.  Run it while no producer or consumer of the previous run is connected.
--
-- What it creates:
--   extension pgq (schema pgq, 3.5)
--   queue     aq_bench_pgq   three event tables pgq.event_<id>_0..2 (autovacuum off on them)
--   consumer  aq_bench       the ONE registered consumer; the C consumer connections share
--                            it (a work queue, not fan-out): see aq_bench.pgq_consume
--   functions aq_bench.pgq_enqueue_array(queue, text[])      bulk producer (optional)
--             aq_bench.pgq_consume(queue, consumer, self_tick) one consumer step
--             aq_bench.pgq_tick(queue, consumer, force)        one ticker step / final tick
-- Teardown (pgq.md): SELECT pgq.drop_queue('aq_bench_pgq', true); and, to remove everything,
--   DROP FUNCTION aq_bench.pgq_enqueue_array(text, text[]), aq_bench.pgq_consume(text, text, boolean),
--                 aq_bench.pgq_tick(text, text, boolean);  DROP EXTENSION pgq CASCADE;

DO $setup$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pgq;
    CREATE SCHEMA IF NOT EXISTS aq_bench;

    -- A fresh queue.  drop_queue(name, true) also unregisters the consumers and deletes their
    -- retry events; it raises when the queue does not exist, hence the WHERE.
    PERFORM pgq.drop_queue(queue_name, true) FROM pgq.queue WHERE queue_name = 'aq_bench_pgq';
    PERFORM pgq.create_queue('aq_bench_pgq');  -- also inserts the queue's first tick

    -- Ticker settings, read by pgq.ticker('aq_bench_pgq').  A call inserts a tick (a batch
    -- boundary: a txid snapshot plus the event sequence's value) when the event sequence moved
    -- since the last tick and either ticker_max_count new events accumulated or the last tick is
    -- ticker_max_lag old.  max_lag 0: every call that sees a new event ticks, so whoever calls
    -- pgq.ticker() alone decides the batch boundaries.  Without new events it ticks with an
    -- exponential back-off capped at ticker_idle_period (idle ticks give empty batches).  That
    -- idle tick is also what eventually delivers events whose sequence values were taken before
    -- a tick but whose transaction committed after it, when no newer event follows: keep the
    -- idle period short.  PgQ's defaults are max_count 500, max_lag 3 s, idle_period 1 min,
    -- with pgqd calling pgq.ticker() once a second: latencies in seconds.
    PERFORM pgq.set_queue_config('aq_bench_pgq', 'ticker_max_lag', '0');
    PERFORM pgq.set_queue_config('aq_bench_pgq', 'ticker_max_count', '500');
    PERFORM pgq.set_queue_config('aq_bench_pgq', 'ticker_idle_period', '100 ms');
    -- Table rotation only happens when pgq.maint_rotate_tables_step1/step2 are called (pgqd's
    -- maintenance; the driver runs no pgqd) and at most once per rotation_period (2 h): during a
    -- run every event stays in pgq.event_<id>_0, nothing is deleted, nothing is truncated.

    -- The one consumer.  Registration starts at the latest tick: the consumer sees every event
    -- inserted afterwards.
    PERFORM pgq.register_consumer('aq_bench_pgq', 'aq_bench');

    -- Bulk producer: all payloads in one INSERT into the queue's current event table, the path
    -- PgQ documents for bulk loads (pgq.current_event_table: "Event can be added to it without
    -- going via functions, e.g. by COPY"; the answer is valid for the current transaction, so
    -- both happen in this one call).  ev_id and ev_txid come from the table's defaults, exactly
    -- as pgq.insert_event() would set them.  The per-event public API is
    --     SELECT count(pgq.insert_event('aq_bench_pgq', 'msg', p)) FROM unnest($1::text[]) p
    -- Returns the number of events inserted.
    CREATE OR REPLACE FUNCTION aq_bench.pgq_enqueue_array(i_queue text, i_payloads text[])
        RETURNS bigint
        LANGUAGE plpgsql VOLATILE
    AS $$
    DECLARE
        n bigint;
    BEGIN
        EXECUTE format('INSERT INTO %s (ev_time, ev_type, ev_data) SELECT now(), ''msg'', p FROM unnest($1) p',
                       pgq.current_event_table(i_queue))
            USING i_payloads;
        GET DIAGNOSTICS n = ROW_COUNT;
        RETURN n;
    END
    $$;

    -- The lock that makes one registered consumer a work queue for C connections, and
    -- serialises every pgq.ticker() call on the queue.  PgQ allows a consumer one open batch at
    -- a time: two sessions calling pgq.next_batch() for the same consumer concurrently get the
    -- SAME events (the second waits on the subscription row, then opens a new batch id over the
    -- same tick range: duplicates, verified on 3.5).  And PgQ warns that parallel pgq.ticker()
    -- calls are dangerous.  The lock is a transaction-level advisory lock taken in a statement of
    -- its own (inside these PL/pgSQL functions every statement takes a new snapshot, so the
    -- queries after the wait see what the previous holder committed; "SELECT
    -- pg_advisory_xact_lock(..), pgq.next_batch(..)" in one SQL statement would not).
    --     pg_advisory_xact_lock(hashtextextended('pgq:' || queue || '/' || consumer, 0))

    -- One consumer step:
    --     SELECT ev_id, ev_data FROM aq_bench.pgq_consume('aq_bench_pgq', 'aq_bench')
    -- inside the driver's BEGIN ... COMMIT (or alone, in autocommit).  Under the lock it opens
    -- the consumer's next batch (the events between its last tick and the next tick); when there
    -- is none and self_tick (the default) it calls pgq.ticker() itself and tries again; it reads
    -- all the batch's events and closes the batch with pgq.finish_batch() (which moves the
    -- consumer's position).  Empty batches (idle ticks) are closed and skipped in the same call.
    -- Everything is in the caller's transaction: ROLLBACK, or a crash before COMMIT, undoes it
    -- all and the next call gets the same events again (verified: pg_terminate_backend before
    -- COMMIT, then the same events under a new batch id); COMMIT makes them consumed.
    -- Result: the events of one batch, in ev_id order (ev_data is the payload), or no row when
    -- there is nothing to consume now (no tick beyond the consumer's position, and with
    -- self_tick no new event for pgq.ticker() to tick): then COMMIT, wait (1 ms), call again.
    -- The lock is held until COMMIT/ROLLBACK: never wait between this call and the COMMIT.
    -- The batch size is whatever accumulated since the previous tick: PgQ consumes whole
    -- batches and cannot be asked for "at most n" (the dequeue batch size does not apply).
    -- It also runs ANALYZE pgq.tick at the queue's 100th and 1000th tick and every 10,000th:
    -- PgQ's batch queries join pgq.tick twice, and with statistics taken while the tick table
    -- was (nearly) empty, e.g. after the previous run's drop_queue, the planner nests two full
    -- scans of pgq.tick: measured 0.2-0.6 s per batch at ~900 ticks, growing with the square of
    -- the tick count (the consumer falls behind for good within seconds).
    CREATE OR REPLACE FUNCTION aq_bench.pgq_consume(i_queue text, i_consumer text, i_self_tick boolean DEFAULT true,
            OUT batch_id bigint, OUT ev_id bigint, OUT ev_time timestamptz, OUT ev_data text)
        RETURNS SETOF record
        LANGUAGE plpgsql VOLATILE
    AS $$
    DECLARE
        n bigint;
        t bigint;
    BEGIN
        PERFORM pg_advisory_xact_lock(hashtextextended('pgq:' || i_queue || '/' || i_consumer, 0));
        LOOP
            batch_id := pgq.next_batch(i_queue, i_consumer);
            IF batch_id IS NULL AND i_self_tick THEN
                t := pgq.ticker(i_queue);
                IF t IS NULL THEN
                    RETURN;
                END IF;
                IF t IN (100, 1000) OR t % 10000 = 0 THEN
                    ANALYZE pgq.tick;
                END IF;
                batch_id := pgq.next_batch(i_queue, i_consumer);
            END IF;
            IF batch_id IS NULL THEN
                RETURN;
            END IF;
            RETURN QUERY SELECT batch_id, e.ev_id, e.ev_time, e.ev_data FROM pgq.get_batch_events(batch_id) e;
            GET DIAGNOSTICS n = ROW_COUNT;
            PERFORM pgq.finish_batch(batch_id);
            IF n > 0 THEN
                RETURN;
            END IF;
            -- an empty batch: closed, look for the next one
        END LOOP;
    END
    $$;

    -- One ticker step, in autocommit, under the same lock:
    --     SELECT aq_bench.pgq_tick('aq_bench_pgq', 'aq_bench')          -- a ticker thread's call
    --     SELECT aq_bench.pgq_tick('aq_bench_pgq', 'aq_bench', true)    -- the final tick
    -- Returns the new tick's id, or NULL when pgq.ticker() saw no reason to tick.  With force,
    -- pgq.force_tick() first moves the event sequence so that pgq.ticker() ticks whatever the
    -- settings: after every producer has returned, one forced tick followed by consume calls
    -- until "no row" drains the queue completely.  (Without it the events of a transaction that
    -- took its sequence values before the last tick and committed after it wait for the next
    -- idle tick, and "no new event since the last tick" does not mean "drained".)
    -- Also runs the ANALYZE described above.
    CREATE OR REPLACE FUNCTION aq_bench.pgq_tick(i_queue text, i_consumer text, i_force boolean DEFAULT false)
        RETURNS bigint
        LANGUAGE plpgsql VOLATILE
    AS $$
    DECLARE
        t bigint;
    BEGIN
        PERFORM pg_advisory_xact_lock(hashtextextended('pgq:' || i_queue || '/' || i_consumer, 0));
        IF i_force THEN
            PERFORM pgq.force_tick(i_queue);
        END IF;
        t := pgq.ticker(i_queue);
        IF t IN (100, 1000) OR t % 10000 = 0 THEN
            ANALYZE pgq.tick;
        END IF;
        RETURN t;
    END
    $$;
END
$setup$;
