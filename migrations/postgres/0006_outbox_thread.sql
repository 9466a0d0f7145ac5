-- A change event is queued once per thread (Store::has_thread, on the ingest path): found by its thread, not by a
-- scan of the outbox.
CREATE INDEX outbox_thread ON outbox (thread_key);
