-- Herald schema (SQLite). Times are milliseconds since the Unix epoch; JSON is TEXT.
CREATE TABLE apps (
    namespace     TEXT NOT NULL,
    name          TEXT NOT NULL,
    uid           TEXT,
    project       TEXT NOT NULL,
    team          TEXT NOT NULL,
    sync_status   TEXT NOT NULL,
    health_status TEXT NOT NULL,
    sync_since    BIGINT NOT NULL,
    health_since  BIGINT NOT NULL,
    observed_at   BIGINT NOT NULL,
    last_seen     BIGINT NOT NULL,
    content_hash  TEXT NOT NULL,
    state_json    TEXT NOT NULL,
    PRIMARY KEY (namespace, name)
);

CREATE TABLE transitions (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    at         BIGINT NOT NULL,
    field      TEXT NOT NULL,
    from_value TEXT,
    to_value   TEXT NOT NULL
);
CREATE INDEX transitions_app ON transitions (namespace, name, id);

CREATE TABLE raw_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    received_at BIGINT NOT NULL,
    namespace   TEXT NOT NULL,
    name        TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    body        TEXT NOT NULL
);
CREATE INDEX raw_events_received ON raw_events (received_at);

CREATE TABLE incidents (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    fingerprint TEXT NOT NULL,
    kind        TEXT NOT NULL,
    namespace   TEXT NOT NULL,
    name        TEXT NOT NULL,
    team        TEXT NOT NULL,
    severity    TEXT NOT NULL,
    state       TEXT NOT NULL,
    since       BIGINT NOT NULL,
    fire_at     BIGINT NOT NULL,
    fired_at    BIGINT,
    resolved_at BIGINT,
    notified    BIGINT NOT NULL DEFAULT 0,
    lease_until BIGINT NOT NULL DEFAULT 0,
    view_json   TEXT NOT NULL
);
CREATE INDEX incidents_due ON incidents (state, fire_at);
CREATE INDEX incidents_app ON incidents (namespace, name, state);
CREATE INDEX incidents_fingerprint ON incidents (fingerprint);

CREATE TABLE notify_groups (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    receiver      TEXT NOT NULL,
    group_key     TEXT NOT NULL,
    active        BIGINT NOT NULL DEFAULT 0,
    generation    BIGINT NOT NULL DEFAULT 0,
    next_flush_at BIGINT,
    last_flush_at BIGINT,
    UNIQUE (receiver, group_key)
);
CREATE INDEX notify_groups_due ON notify_groups (next_flush_at);

CREATE TABLE group_members (
    group_id    BIGINT NOT NULL,
    incident_id BIGINT NOT NULL,
    status      TEXT NOT NULL,
    dirty       BIGINT NOT NULL,
    PRIMARY KEY (group_id, incident_id)
);
CREATE INDEX group_members_incident ON group_members (incident_id);

CREATE TABLE escalations (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    incident_id BIGINT NOT NULL,
    step        BIGINT NOT NULL,
    after_secs  BIGINT NOT NULL,
    due_at      BIGINT NOT NULL,
    receivers   TEXT NOT NULL,
    done        BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX escalations_due ON escalations (done, due_at);

CREATE TABLE outbox (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    receiver     TEXT NOT NULL,
    order_key    TEXT NOT NULL,
    thread_key   TEXT NOT NULL,
    action       TEXT NOT NULL,
    payload      TEXT NOT NULL,
    state        TEXT NOT NULL,
    attempts     BIGINT NOT NULL DEFAULT 0,
    due_at       BIGINT NOT NULL,
    created_at   BIGINT NOT NULL,
    lease_owner  TEXT,
    lease_until  BIGINT NOT NULL DEFAULT 0,
    last_error   TEXT,
    delivered_at BIGINT
);
CREATE INDEX outbox_due ON outbox (state, due_at);
CREATE INDEX outbox_order ON outbox (order_key, state, id);

CREATE TABLE memos (
    receiver   TEXT NOT NULL,
    thread_key TEXT NOT NULL,
    memo       TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (receiver, thread_key)
);

CREATE TABLE silences (
    id         TEXT PRIMARY KEY,
    matchers   TEXT NOT NULL,
    starts_at  BIGINT NOT NULL,
    ends_at    BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    comment    TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
