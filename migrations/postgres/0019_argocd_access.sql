-- A project of an Argo CD instance whose Applications Herald's token may no longer `get` (a GET with the project
-- answered 403), and since when. Its Applications are kept, unverifiable, until a listing or a GET sees the project
-- again. One row per denial, written in the transaction that queues the default team's message, so the team is told
-- once when it starts and once when it ends, whichever replica saw it.
CREATE TABLE argocd_access (
    instance     TEXT NOT NULL,
    project      TEXT NOT NULL,
    denied_since BIGINT NOT NULL,
    PRIMARY KEY (instance, project)
);
