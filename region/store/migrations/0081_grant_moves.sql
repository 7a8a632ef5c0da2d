-- The moves a grant let start: the workflow ID of each move whose own check of the grant
-- passed (a transfer, a bulk run, a migration started alone). Their children may finish under
-- the grant after it expired (region/server/grants.go); revoking the grant still stops them.
CREATE TABLE migrate_grant_moves (
    grant_id   text NOT NULL REFERENCES migrate_grants (id),
    move       text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (grant_id, move)
);
