-- The queries Herald runs on its own, found from an index instead of walking a table that grows with the store.
--
-- Firing incidents that notified nobody yet (silenced when they fired), looked for on every tick of the scheduler:
-- this index holds only those rows (its columns are the query's terms, so the planner prefers it). Without it each
-- tick walked every firing incident: 55 ms and 50 MB of reads a tick at 50,000 of them, on a store doing nothing.
CREATE INDEX incidents_unnotified ON incidents (state, notified, id) WHERE state = 'firing' AND notified = 0;
-- Deliveries done before the retention, purged: without it each purge read every done delivery, payload and all
-- (0.9 s of CPU and 1.6 GB of reads at 100,000 of them, to delete none).
CREATE INDEX outbox_done_at ON outbox (state, delivered_at);
