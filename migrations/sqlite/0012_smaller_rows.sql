-- Smaller rows per change.
-- Raw bodies stored as differences. A row's `chain` (NULL for rows written before) names the run of bodies of one
-- Application it belongs to: the run's first row holds the whole body (zstd), each later one only what differs from
-- the body before it (zstd with that body as its dictionary). A run is a handful of bodies, and the purge keeps a
-- run whole while any of its rows is within the retention, so every stored body can be read back.
ALTER TABLE raw_events ADD COLUMN chain BIGINT;
-- An incident's view zstd-compressed (rows written before keep their JSON text in `view_json`, which new rows leave
-- empty).
ALTER TABLE incidents ADD COLUMN view_doc BLOB;
