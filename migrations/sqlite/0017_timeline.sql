-- The timeline holds one row per change of an Application (its transitions together, as JSON
-- `[[field, from, to], …]`, in the order they were derived) instead of one row per field: a change moved 3–4 fields
-- (sync, health, operation, revision) and each row repeated the Application's key in the row and in the index.
-- New rows hold the JSON zstd-compressed with the documents dictionary (`changes_doc`); the rows moved here from
-- `transitions` hold it as text (`changes`).
CREATE TABLE timeline (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    instance  TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name      TEXT NOT NULL,
    at        BIGINT NOT NULL,
    changes   TEXT,
    changes_doc BLOB
);
INSERT INTO timeline (instance, namespace, name, at, changes)
SELECT instance, namespace, name, at, json_group_array(json_array(field, from_value, to_value) ORDER BY id)
FROM transitions
GROUP BY instance, namespace, name, at
ORDER BY MIN(id);
DROP TABLE transitions;
CREATE INDEX timeline_app ON timeline (instance, namespace, name, id);
