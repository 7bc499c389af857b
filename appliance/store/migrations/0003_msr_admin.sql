-- 0003_msr_admin: MSRs an operator took out of media selection on this box
-- (outpostctl media-resources set NAME inactive), kept across restarts. A
-- row means inactive; setting the MSR active again deletes it.
CREATE TABLE msr_inactive (
    msr   TEXT    PRIMARY KEY,
    since INTEGER NOT NULL
) STRICT;
