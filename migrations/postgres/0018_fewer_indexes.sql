-- Indexes that cost bytes on every row and little or nothing to the queries:
-- - no query looks an incident up by its fingerprint;
-- - only pending incidents are looked for by when they fire (the scheduler's claim, `?state=pending` pages), so
--   the index of when they fire holds only those, not every incident ever resolved (`state` first: with it
--   SQLite prefers this index to `(state, id)` for the claim, checked with EXPLAIN QUERY PLAN);
-- - raw bodies are purged by id, found from when they were received (`Store::purge_raw`): ids grow with time;
-- - a dictionary of raw bodies is unused once every row up to the last that used it is purged: each remembers
--   that row (`last_row`) instead of an index of every row that names one.
DROP INDEX incidents_fingerprint;
DROP INDEX incidents_due;
CREATE INDEX incidents_due ON incidents (state, fire_at) WHERE state = 'pending';
DROP INDEX raw_events_received;
ALTER TABLE raw_dictionaries ADD COLUMN last_row BIGINT;
UPDATE raw_dictionaries SET last_row = (SELECT MAX(id) FROM raw_events WHERE raw_events.dict = raw_dictionaries.id);
DROP INDEX raw_events_dict;
