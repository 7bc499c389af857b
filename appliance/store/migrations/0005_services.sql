-- 0005_services: what users set from their phones by feature codes (do
-- not disturb, call forwarding), over the document's values. base is the
-- document's value the setting was made over: once a push changes that
-- field, the document's new value wins.
CREATE TABLE user_services (
    extension TEXT    NOT NULL,
    feature   TEXT    NOT NULL,
    value     TEXT    NOT NULL,
    base      TEXT    NOT NULL,
    set_at    INTEGER NOT NULL,
    PRIMARY KEY (extension, feature)
) STRICT;
