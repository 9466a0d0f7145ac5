-- Several Argo CD instances: the instance is part of an Application's identity. Everything stored before belongs to
-- the instance named `default` (what `argocd.url` / `argocd.api` describe), so an upgrade changes nothing it held.
CREATE TABLE apps_by_instance (
    instance      TEXT NOT NULL DEFAULT 'default',
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
    deleted_at    BIGINT,
    version       BIGINT NOT NULL DEFAULT 0,
    state_doc     BLOB,
    prune_pending BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (instance, namespace, name)
);
INSERT INTO apps_by_instance (instance, namespace, name, uid, project, team, sync_status, health_status, sync_since,
    health_since, observed_at, last_seen, content_hash, state_json, deleted_at, version, state_doc, prune_pending)
SELECT 'default', namespace, name, uid, project, team, sync_status, health_status, sync_since, health_since,
    observed_at, last_seen, content_hash, state_json, deleted_at, version, state_doc, prune_pending FROM apps;
DROP TABLE apps;
ALTER TABLE apps_by_instance RENAME TO apps;
CREATE INDEX apps_deleted ON apps (deleted_at);
CREATE INDEX apps_prune_pending ON apps (prune_pending);
CREATE INDEX apps_instance ON apps (instance, deleted_at);

ALTER TABLE transitions ADD COLUMN instance TEXT NOT NULL DEFAULT 'default';
DROP INDEX transitions_app;
CREATE INDEX transitions_app ON transitions (instance, namespace, name, id);

ALTER TABLE raw_events ADD COLUMN instance TEXT NOT NULL DEFAULT 'default';
CREATE INDEX raw_events_app ON raw_events (instance, namespace, name, id);

ALTER TABLE incidents ADD COLUMN instance TEXT NOT NULL DEFAULT 'default';
DROP INDEX incidents_app;
CREATE INDEX incidents_app ON incidents (instance, namespace, name, state);
