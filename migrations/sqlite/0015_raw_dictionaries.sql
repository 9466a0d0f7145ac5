-- The dictionaries the first body of a run of raw bodies is compressed with (bodies of other Applications, one
-- after the other; `content_z` zstd-compressed), and which one each such row used (`dict`; NULL: none). The index
-- holds only the rows that use one: the purge asks whether any row still uses a dictionary.
CREATE TABLE raw_dictionaries (
    id          INTEGER PRIMARY KEY,
    created_at  BIGINT NOT NULL,
    content_z   BLOB NOT NULL
);
ALTER TABLE raw_events ADD COLUMN dict BIGINT;
CREATE INDEX raw_events_dict ON raw_events (dict) WHERE dict IS NOT NULL;
