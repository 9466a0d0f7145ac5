-- A delivery's payload (a group's is tens of KB) moves out of its row, compressed: a list of deliveries, the
-- worker's claims and the purge read small rows instead of walking each payload's overflow pages. Its headline
-- (the notification's title and its incidents' fingerprints, as JSON) stays in the row for lists. Rows queued
-- before keep their payload in `payload` and have no headline (it is read from the payload).
CREATE TABLE outbox_payloads (
    outbox_id   INTEGER PRIMARY KEY,
    payload_doc BLOB NOT NULL
);
ALTER TABLE outbox ADD COLUMN title TEXT;
ALTER TABLE outbox ADD COLUMN about TEXT;
