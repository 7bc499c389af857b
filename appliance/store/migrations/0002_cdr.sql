-- 0002_cdr: call detail records, one row per call.
--
-- Rows are appended in batches by the CDR writer and pruned by id (oldest
-- first) to a bounded count, so the table never grows without limit on a box
-- that runs for years. started is indexed for "cdr --since".
CREATE TABLE cdr (
    id          INTEGER PRIMARY KEY,
    call_id     TEXT    NOT NULL,
    started     INTEGER NOT NULL,
    answered    INTEGER NOT NULL,
    ended       INTEGER NOT NULL,
    caller      TEXT    NOT NULL,
    dialled     TEXT    NOT NULL,
    routed      TEXT    NOT NULL,
    route       TEXT    NOT NULL,
    target      TEXT    NOT NULL,
    mode        TEXT    NOT NULL,
    code        INTEGER NOT NULL,
    disposition TEXT    NOT NULL,
    hangup      TEXT    NOT NULL,
    media       TEXT    NOT NULL
) STRICT;

CREATE INDEX cdr_started ON cdr (started);
