-- The moves a grant let start: the workflow ID and the first run of each move whose own check
-- of the grant passed (a transfer, a bulk run, a migration started alone). The children of that
-- run chain may finish under the grant after it expired (region/server/grants.go); a later
-- move under the same workflow ID is another run chain and gets nothing from it. Revoking the
-- grant still stops them.
CREATE TABLE migrate_grant_moves (
    grant_id   text NOT NULL REFERENCES migrate_grants (id),
    move       text NOT NULL,
    run        text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (grant_id, move, run)
);
