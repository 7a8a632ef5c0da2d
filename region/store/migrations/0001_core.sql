-- Machines, their jobs and logs, profiles and pools. Every table keeps the full api object in
-- doc (jsonb) and copies the keys and relations it needs for constraints into typed columns.
-- seq is the internal row id: the generic layer locates rows by it and orders by creation.

CREATE TABLE pools (
    seq  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    name text PRIMARY KEY,
    doc  jsonb NOT NULL
);
INSERT INTO pools (name, doc) VALUES ('default', '{"Name": "default", "Description": "", "Meta": {}}');

CREATE TABLE profiles (
    seq  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    name text PRIMARY KEY,
    doc  jsonb NOT NULL
);

-- profile_profiles: profile includes the profile "uses".
CREATE TABLE profile_profiles (
    profile text NOT NULL REFERENCES profiles (name) ON DELETE CASCADE,
    uses    text NOT NULL REFERENCES profiles (name) ON DELETE RESTRICT,
    PRIMARY KEY (profile, uses)
);
CREATE INDEX profile_profiles_uses ON profile_profiles (uses);

CREATE TABLE machines (
    seq  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    uuid uuid PRIMARY KEY,
    name text NOT NULL CONSTRAINT machines_name_key UNIQUE,
    pool text REFERENCES pools (name),
    doc  jsonb NOT NULL
);
CREATE INDEX machines_pool ON machines (pool);

CREATE TABLE machine_macs (
    mac     text PRIMARY KEY,
    machine uuid NOT NULL REFERENCES machines (uuid) ON DELETE CASCADE
);
CREATE INDEX machine_macs_machine ON machine_macs (machine);

CREATE TABLE machine_profiles (
    machine uuid NOT NULL REFERENCES machines (uuid) ON DELETE CASCADE,
    profile text NOT NULL REFERENCES profiles (name) ON DELETE RESTRICT,
    PRIMARY KEY (machine, profile)
);
CREATE INDEX machine_profiles_profile ON machine_profiles (profile);

CREATE TABLE jobs (
    seq        bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    uuid       uuid PRIMARY KEY,
    machine    uuid NOT NULL REFERENCES machines (uuid) ON DELETE CASCADE,
    start_time timestamptz NOT NULL,
    doc        jsonb NOT NULL
);
CREATE INDEX jobs_machine ON jobs (machine, start_time);

CREATE TABLE job_logs (
    job  uuid PRIMARY KEY REFERENCES jobs (uuid) ON DELETE CASCADE,
    text text NOT NULL
);
