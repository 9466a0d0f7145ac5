-- Acknowledgements (who took an incident, when, until when; NULL until: until it resolves) live on the incident
-- row: a re-firing after a resolve is a new row, so it starts unacknowledged. used_links remembers each signed
-- one-click link that acted (by its nonce), so a replay says what already happened instead of acting again.
ALTER TABLE incidents ADD COLUMN acked_by TEXT;
ALTER TABLE incidents ADD COLUMN acked_at BIGINT;
ALTER TABLE incidents ADD COLUMN ack_until BIGINT;
ALTER TABLE incidents ADD COLUMN ack_comment TEXT;
CREATE TABLE used_links (
    nonce       TEXT PRIMARY KEY,
    used_at     BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    outcome     TEXT NOT NULL
);
CREATE INDEX used_links_expires ON used_links (expires_at);
