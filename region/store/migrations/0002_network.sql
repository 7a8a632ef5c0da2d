-- Racks and what they serve: fabrics, VLANs, subnets, leases and KVM pods.

CREATE TABLE racks (
    seq  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    uuid uuid PRIMARY KEY,
    name text NOT NULL CONSTRAINT racks_name_key UNIQUE,
    doc  jsonb NOT NULL
);

CREATE TABLE fabrics (
    seq  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    uuid uuid PRIMARY KEY,
    name text NOT NULL CONSTRAINT fabrics_name_key UNIQUE,
    doc  jsonb NOT NULL
);

CREATE TABLE vlans (
    seq            bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    uuid           uuid PRIMARY KEY,
    name           text NOT NULL,
    fabric         uuid NOT NULL REFERENCES fabrics (uuid),
    vid            integer NOT NULL CHECK (vid BETWEEN 0 AND 4094),
    primary_rack   uuid REFERENCES racks (uuid),
    secondary_rack uuid REFERENCES racks (uuid),
    doc            jsonb NOT NULL,
    CONSTRAINT vlans_fabric_vid_key UNIQUE (fabric, vid),
    CHECK (secondary_rack IS NULL OR (primary_rack IS NOT NULL AND secondary_rack <> primary_rack))
);
CREATE INDEX vlans_primary_rack ON vlans (primary_rack);
CREATE INDEX vlans_secondary_rack ON vlans (secondary_rack);

CREATE TABLE subnets (
    seq  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    uuid uuid PRIMARY KEY,
    name text NOT NULL,
    cidr cidr NOT NULL CONSTRAINT subnets_cidr_key UNIQUE,
    vlan uuid REFERENCES vlans (uuid),
    doc  jsonb NOT NULL
);
CREATE INDEX subnets_vlan ON subnets (vlan);

-- Leases go with their subnet; the granting rack is informational (leases outlive racks).
CREATE TABLE leases (
    seq    bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    subnet uuid NOT NULL REFERENCES subnets (uuid) ON DELETE CASCADE,
    addr   inet NOT NULL,
    mac    text NOT NULL,
    doc    jsonb NOT NULL,
    CONSTRAINT leases_subnet_addr_key PRIMARY KEY (subnet, addr)
);
CREATE INDEX leases_addr ON leases (addr);
CREATE INDEX leases_mac ON leases (mac);

CREATE TABLE pods (
    seq  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    uuid uuid PRIMARY KEY,
    name text NOT NULL CONSTRAINT pods_name_key UNIQUE,
    rack uuid REFERENCES racks (uuid),
    pool text REFERENCES pools (name),
    doc  jsonb NOT NULL
);
CREATE INDEX pods_rack ON pods (rack);
CREATE INDEX pods_pool ON pods (pool);
