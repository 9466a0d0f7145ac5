-- Pages of the read API filtered by state, newest first (`/v1/incidents?state=firing`, `/v1/outbox?state=dead`):
-- walked from the index instead of scanning every row newer than the cursor.
CREATE INDEX incidents_state_id ON incidents (state, id);
CREATE INDEX outbox_state_id ON outbox (state, id);
