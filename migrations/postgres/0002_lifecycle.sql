-- Deleted Applications (kept, hidden from lists, until raw_retention ends) and named leases (one replica does a
-- periodic job such as the Argo CD API resync per interval).
ALTER TABLE apps ADD COLUMN deleted_at BIGINT;
CREATE INDEX apps_deleted ON apps (deleted_at);
CREATE TABLE leases (
    name  TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    until BIGINT NOT NULL
);
