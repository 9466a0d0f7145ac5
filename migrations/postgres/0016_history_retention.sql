-- Resolved incidents are purged after `storage.history_retention`: the purge finds them by when they resolved,
-- from an index holding only resolved incidents (not by walking every incident; with `state` first, SQLite
-- prefers it to the `(state, id)` index, checked with EXPLAIN QUERY PLAN).
CREATE INDEX incidents_resolved ON incidents (state, resolved_at) WHERE state = 'resolved';
