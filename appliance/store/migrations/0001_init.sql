-- 0001_init: the initial outpostd schema.
--
-- Times are INTEGER nanoseconds since the Unix epoch (UTC); read them with
-- e.g. datetime(applied_at / 1000000000, 'unixepoch') in the sqlite3 shell.

-- Marks the file as an outpostd store ("OPST"); Open refuses a file that
-- carries a different application_id.
PRAGMA application_id = 1330664276;

-- One row per applied migration. The runner treats a missing table as
-- "nothing applied yet"; this migration creates it.
CREATE TABLE schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
) STRICT;

-- Every applied configuration document is a new row; exactly one row is
-- active once any exists. The document column comes last so that listing
-- the history never reads the (possibly large) document's overflow pages.
CREATE TABLE config_versions (
    version    INTEGER PRIMARY KEY CHECK (version >= 1),
    applied_at INTEGER NOT NULL,
    source     TEXT    NOT NULL,
    sha256     TEXT    NOT NULL CHECK (length(sha256) = 64),
    active     INTEGER NOT NULL DEFAULT 0 CHECK (active IN (0, 1)),
    document   BLOB    NOT NULL
) STRICT;

-- At most one active version, enforced by the database itself.
CREATE UNIQUE INDEX config_versions_one_active
    ON config_versions (active) WHERE active = 1;

-- Registrar bindings, keyed by (address of record, contact URI). The primary
-- key's leading column also serves "delete every binding of an AOR".
CREATE TABLE bindings (
    aor         TEXT    NOT NULL,
    contact_uri TEXT    NOT NULL,
    contact     TEXT    NOT NULL,
    source      TEXT    NOT NULL,
    local_addr  TEXT    NOT NULL,
    call_id     TEXT    NOT NULL,
    cseq        INTEGER NOT NULL CHECK (cseq BETWEEN 0 AND 4294967295),
    q           REAL    NOT NULL,
    expires     INTEGER NOT NULL,
    registered  INTEGER NOT NULL,
    user_agent  TEXT    NOT NULL,
    instance    TEXT    NOT NULL,
    reg_id      INTEGER NOT NULL,
    PRIMARY KEY (aor, contact_uri)
) STRICT, WITHOUT ROWID;
