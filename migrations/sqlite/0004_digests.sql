-- Digest slots: one row per (team, scheduled instant in UTC), inserted under that unique key in the transaction
-- that queues the digest's deliveries, so two replicas (or a restart) send a slot once. `state` is `claimed` while
-- a replica holds it (until `lease_until`), then `sent`, `empty` (nothing to report, nothing sent), or `skipped`
-- when the slot was missed by more than `catch_up`.
CREATE TABLE digests (
    team        TEXT NOT NULL,
    slot_at     BIGINT NOT NULL,
    state       TEXT NOT NULL,
    claimed_by  TEXT NOT NULL DEFAULT '',
    lease_until BIGINT NOT NULL DEFAULT 0,
    sent_at     BIGINT,
    PRIMARY KEY (team, slot_at)
);
