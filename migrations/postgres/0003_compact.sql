-- Compact storage and replicas that cache. The state document and the raw bodies are kept zstd-compressed in BYTEA
-- columns (`state_doc`, `body_z`; rows written before keep their text in `state_json` / `body`, which new rows leave
-- empty); `version` counts the writes of an Application's state, so a replica that caches it can write it back only
-- if nobody else wrote it since (compare-and-set); `prune_pending` is what /v1/prune-pending selects by, set from
-- the state when it is written instead of read out of the JSON.
ALTER TABLE apps ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE apps ADD COLUMN state_doc BYTEA;
ALTER TABLE apps ADD COLUMN prune_pending BIGINT NOT NULL DEFAULT 0;
UPDATE apps SET prune_pending = 1 WHERE
    jsonb_path_exists(state_json::jsonb, '$.snapshot.resources[*] ? (@.requires_pruning == true)')
    OR jsonb_path_exists(state_json::jsonb, '$.snapshot.operation.resources[*] ? (@.status == "PruneSkipped")');
CREATE INDEX apps_prune_pending ON apps (prune_pending);
ALTER TABLE raw_events ADD COLUMN body_z BYTEA;
