-- A drop the Argo CD listing showed and Herald held back (argocd.api.max_drop_share): the Applications it lacked
-- (a JSON array of {namespace, name}), so the next listing agrees or not whichever replica does it.
CREATE TABLE listing_guard (
    name    TEXT PRIMARY KEY,
    apps    TEXT NOT NULL,
    held_at BIGINT NOT NULL,
    stored  BIGINT NOT NULL
);
