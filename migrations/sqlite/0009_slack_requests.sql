-- Slack interactivity: each signed request from Slack (a button click) is remembered by a hash of its signature
-- until its timestamp leaves the 5-minute window, so the same request replayed — to this replica or another, or
-- after a restart — is refused. Rows past the window are purged when a new request is claimed.
CREATE TABLE slack_requests (
    signature_hash  TEXT PRIMARY KEY,
    expires_at      BIGINT NOT NULL
);
CREATE INDEX slack_requests_expires ON slack_requests (expires_at);
