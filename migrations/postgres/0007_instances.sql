-- Several Argo CD instances: the instance is part of an Application's identity. Everything stored before belongs to
-- the instance named `default` (what `argocd.url` / `argocd.api` describe), so an upgrade changes nothing it held.
ALTER TABLE apps ADD COLUMN instance TEXT NOT NULL DEFAULT 'default';
ALTER TABLE apps DROP CONSTRAINT apps_pkey;
ALTER TABLE apps ADD PRIMARY KEY (instance, namespace, name);
CREATE INDEX apps_instance ON apps (instance, deleted_at);

ALTER TABLE transitions ADD COLUMN instance TEXT NOT NULL DEFAULT 'default';
DROP INDEX transitions_app;
CREATE INDEX transitions_app ON transitions (instance, namespace, name, id);

ALTER TABLE raw_events ADD COLUMN instance TEXT NOT NULL DEFAULT 'default';
CREATE INDEX raw_events_app ON raw_events (instance, namespace, name, id);

ALTER TABLE incidents ADD COLUMN instance TEXT NOT NULL DEFAULT 'default';
DROP INDEX incidents_app;
CREATE INDEX incidents_app ON incidents (instance, namespace, name, state);
