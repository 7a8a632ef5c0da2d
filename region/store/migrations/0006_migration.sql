-- Machine migration, the machine agent API, machine secrets and the tasks jobs run.

-- The key migrate tickets are signed with: one per region cluster, minted on first use, so
-- every region process of the cluster verifies the tickets any of them minted.
CREATE TABLE ticket_key (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    key       bytea NOT NULL CHECK (length(key) >= 32)
);

-- The machine a spent ticket imported: a retried import of that machine with the same ticket
-- is accepted (the caller may have lost the answer), any other reuse is a replay.
ALTER TABLE tickets ADD COLUMN machine uuid;
CREATE INDEX tickets_machine ON tickets (machine);

-- The state of a machine and its jobs before a migration quiesced it, for export, unquiesce
-- and restore. It goes with the machine.
CREATE TABLE migration_snapshots (
    machine   uuid PRIMARY KEY REFERENCES machines (uuid) ON DELETE CASCADE,
    migration text NOT NULL,
    doc       jsonb NOT NULL,
    jobs      jsonb NOT NULL,
    taken_at  timestamptz NOT NULL DEFAULT now()
);

-- Secrets live here only: never in the machine's doc, exports or events.
CREATE TABLE machine_secrets (
    machine uuid NOT NULL REFERENCES machines (uuid) ON DELETE CASCADE,
    name    text NOT NULL,
    value   text NOT NULL,
    PRIMARY KEY (machine, name)
);

CREATE TABLE tasks (
    seq  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    name text PRIMARY KEY,
    doc  jsonb NOT NULL
);

-- next-job looks for the oldest created job of one machine on every poll.
CREATE INDEX jobs_created ON jobs (machine, seq) WHERE doc->>'State' = 'created';
