-- Syslog of machines, received by racks. No foreign key to machines: a machine's log outlives
-- the machine until retention removes it, and deleting a machine never waits on its log.
CREATE TABLE syslog (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    machine  uuid NOT NULL,
    received timestamptz NOT NULL, -- when the rack received it (the Since filter)
    stored   timestamptz NOT NULL DEFAULT now(), -- the region's clock (retention by age)
    doc      jsonb NOT NULL
);
CREATE INDEX syslog_machine ON syslog (machine, id);
CREATE INDEX syslog_stored ON syslog (stored);
