-- What storms read of an incident without decompressing its view: its destination cluster and a key of its first
-- message (xxh3-64 of the message as stored, trimmed; '' when it has none), written with every view. A row written
-- before has NULL here and is read whole, as before.
ALTER TABLE incidents ADD COLUMN cluster TEXT;
ALTER TABLE incidents ADD COLUMN message_key TEXT;
