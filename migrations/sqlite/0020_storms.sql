-- Storms: many Applications of one destination cluster (or, across clusters, one Argo CD instance) entering the
-- same problem at once. The storm is an incident of kind `storm` (told to the default team); this row says what it
-- is about, and each member incident names it (`incidents.storm_id`), so its members are counted from the index
-- below. At most one storm is open per cluster (or instance) and problem: the unique index holds that whichever
-- replica opens it.
CREATE TABLE storms (
    incident_id BIGINT PRIMARY KEY,
    instance    TEXT NOT NULL,
    cluster     TEXT NOT NULL,
    kind        TEXT NOT NULL,
    since       BIGINT NOT NULL,
    ended_at    BIGINT
);
CREATE UNIQUE INDEX storms_open ON storms (instance, cluster, kind) WHERE ended_at IS NULL;
ALTER TABLE incidents ADD COLUMN storm_id BIGINT;
CREATE INDEX incidents_storm ON incidents (storm_id, state) WHERE storm_id IS NOT NULL;
