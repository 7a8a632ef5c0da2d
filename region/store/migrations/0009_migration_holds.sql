-- Who holds a machine during a migration, when a migrate ticket dies, and grants to start moves.

-- A spent ticket is open until the import it made completes: the imported machine is
-- activated here, or its inactive copy is deleted. A retry of the open import with the same
-- ticket is accepted; a closed ticket imports nothing again.
ALTER TABLE tickets ADD COLUMN closed_at timestamptz;
-- The migration (workflow ID) the import belongs to, when the importer named it: the
-- inactive copy is held by that migration until the ticket closes.
ALTER TABLE tickets ADD COLUMN migration text;

-- Grants this region issued to start a move of its machines, racks or bulk selections
-- (region/tickets grants). The signed grant is verified against this row, so any grant,
-- and a schedule's long-lived one above all, can be revoked.
CREATE TABLE migrate_grants (
    id         text PRIMARY KEY,
    kind       text NOT NULL,
    subject    text NOT NULL,
    target     text NOT NULL,
    granted_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);
