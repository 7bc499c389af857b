-- 0004_messages: instant messages kept for a local user with no phone
-- registered, delivered when one registers (gateway: store-and-forward).
CREATE TABLE offline_messages (
    id           INTEGER PRIMARY KEY,
    addressee    TEXT    NOT NULL,
    sender       TEXT    NOT NULL,
    display      TEXT    NOT NULL,
    content_type TEXT    NOT NULL,
    body         BLOB    NOT NULL,
    received     INTEGER NOT NULL
) STRICT;
CREATE INDEX offline_messages_addressee ON offline_messages (addressee, id);
