-- Which Application and incident each delivery is about (a grouped message names several): what an Application's
-- page lists as "who was told what, when". Written with the outbox row; a row whose delivery was purged is left
-- to join nothing and goes with the next purge. Deliveries queued before this migration are not listed.
CREATE TABLE outbox_apps (
    outbox_id    BIGINT NOT NULL,
    incident_id  BIGINT NOT NULL,
    instance     TEXT NOT NULL,
    namespace    TEXT NOT NULL,
    name         TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (outbox_id, incident_id)
);
CREATE INDEX outbox_apps_app ON outbox_apps (instance, namespace, name, created_at, outbox_id);
CREATE INDEX outbox_apps_incident ON outbox_apps (incident_id);
