-- Enlistment (store/enlist.go): the identities besides its MACs (machine_macs) a machine is
-- matched by when it boots unknown: its SMBIOS UUID, its serial (as Fingerprint.SSNHash) and
-- its BMC address. Unique, so two machines can never claim one, whatever process writes.
CREATE TABLE machine_identities (
    kind    text NOT NULL CHECK (kind IN ('system-uuid', 'serial', 'bmc')),
    value   text NOT NULL,
    machine uuid NOT NULL REFERENCES machines (uuid) ON DELETE CASCADE,
    PRIMARY KEY (kind, value)
);
CREATE INDEX machine_identities_machine ON machine_identities (machine);

-- Machines stored before this migration: their SMBIOS UUIDs, the first holder of a value
-- keeps it (placeholders that many boards share identify nothing and are left out, as in
-- machineIdentities).
INSERT INTO machine_identities (kind, value, machine)
SELECT DISTINCT ON (lower(doc->'Fingerprint'->>'SystemUUID')) 'system-uuid', lower(doc->'Fingerprint'->>'SystemUUID'), uuid
FROM machines
WHERE doc->'Fingerprint'->>'SystemUUID' ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
  AND lower(doc->'Fingerprint'->>'SystemUUID') NOT IN ('00000000-0000-0000-0000-000000000000',
      'ffffffff-ffff-ffff-ffff-ffffffffffff', '03000200-0400-0500-0006-000700080009')
ORDER BY lower(doc->'Fingerprint'->>'SystemUUID'), seq
ON CONFLICT DO NOTHING;

CREATE TABLE commissioning_scripts (
    seq  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    name text PRIMARY KEY,
    doc  jsonb NOT NULL
);
