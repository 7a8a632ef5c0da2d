-- Audit log, operations queued while a rack or machine is paused, region identity and the
-- processes of the region cluster.

CREATE TABLE events (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    time    timestamptz NOT NULL DEFAULT now(),
    actor   text NOT NULL,
    action  text NOT NULL,
    kind    text NOT NULL,
    key     text NOT NULL,
    details jsonb NOT NULL
);
CREATE INDEX events_kind_key ON events (kind, key);
CREATE INDEX events_actor ON events (actor);

CREATE TABLE pending_operations (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    target   uuid NOT NULL,
    kind     text NOT NULL,
    payload  jsonb NOT NULL,
    created  timestamptz NOT NULL DEFAULT now(),
    released boolean NOT NULL DEFAULT false
);
CREATE INDEX pending_operations_target ON pending_operations (target) WHERE NOT released;

-- One row: the region's stable identity.
CREATE TABLE region_identity (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    uuid      uuid NOT NULL DEFAULT gen_random_uuid(),
    name      text NOT NULL
);

CREATE TABLE region_processes (
    url       text PRIMARY KEY,
    last_seen timestamptz NOT NULL
);
