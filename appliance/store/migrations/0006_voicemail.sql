-- 0006_voicemail: the index of the messages the box recorded. The audio
-- is a WAV file under the data directory's voicemail/<mailbox>/<id>.wav,
-- written and synced before its row says "new"; a row still "recording"
-- at start is an interrupted recording, repaired from its file.
-- delivered_at is when HQ acknowledged the message (0: not yet).
CREATE TABLE voicemail (
    id           TEXT    PRIMARY KEY,
    mailbox      TEXT    NOT NULL,
    caller       TEXT    NOT NULL,
    caller_name  TEXT    NOT NULL,
    received     INTEGER NOT NULL,
    duration_ms  INTEGER NOT NULL,
    bytes        INTEGER NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('recording', 'new', 'saved')),
    delivered_at INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX voicemail_by_mailbox ON voicemail (mailbox, received);

-- The mailboxes' PINs, set from the phone: "pbkdf2-sha256$iterations$salt$key".
CREATE TABLE voicemail_pins (
    mailbox TEXT    PRIMARY KEY,
    hash    TEXT    NOT NULL,
    set_at  INTEGER NOT NULL
) STRICT;
