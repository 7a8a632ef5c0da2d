-- DNS: the region's domains, operators' records, and the change counter the SOA serial of
-- the region's zones is derived from.

CREATE TABLE domains (
    seq        bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    name       text PRIMARY KEY,
    is_default boolean NOT NULL,
    doc        jsonb NOT NULL
);
-- At most one default domain.
CREATE UNIQUE INDEX domains_one_default ON domains (is_default) WHERE is_default;

CREATE TABLE dnsrecords (
    seq    bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    uuid   uuid PRIMARY KEY,
    domain text NOT NULL REFERENCES domains (name),
    name   text NOT NULL,
    doc    jsonb NOT NULL
);
CREATE INDEX dnsrecords_domain ON dnsrecords (domain, name);

-- Every committed change of data the zones show adds a row to dns_changes (triggers below,
-- in the writing transaction, so no lock is shared between writers). The serial is
-- dns_serial_base.n plus the rows a snapshot sees: it grows with every committed change, and
-- every region process reading the same snapshot computes the same serial. Compaction moves
-- rows into n in one transaction, which leaves the sum unchanged.
CREATE TABLE dns_changes (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY
);
CREATE TABLE dns_serial_base (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    n         bigint NOT NULL
);
INSERT INTO dns_serial_base (n) VALUES (1);

CREATE FUNCTION dns_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dns_changes DEFAULT VALUES;
    RETURN NULL;
END
$$;

CREATE TRIGGER domains_dns AFTER INSERT OR UPDATE OR DELETE ON domains
    FOR EACH STATEMENT EXECUTE FUNCTION dns_changed();
CREATE TRIGGER dnsrecords_dns AFTER INSERT OR UPDATE OR DELETE ON dnsrecords
    FOR EACH STATEMENT EXECUTE FUNCTION dns_changed();
CREATE TRIGGER subnets_dns AFTER INSERT OR DELETE ON subnets
    FOR EACH ROW EXECUTE FUNCTION dns_changed();
CREATE TRIGGER subnets_dns_update AFTER UPDATE ON subnets
    FOR EACH ROW WHEN (OLD.cidr IS DISTINCT FROM NEW.cidr) EXECUTE FUNCTION dns_changed();
-- Machines: what puts one in the zones (name, address, a migrated stub, an inactive import).
CREATE TRIGGER machines_dns AFTER INSERT OR DELETE ON machines
    FOR EACH ROW EXECUTE FUNCTION dns_changed();
CREATE TRIGGER machines_dns_update AFTER UPDATE ON machines
    FOR EACH ROW WHEN ((OLD.doc->>'Name', OLD.doc->>'Address', OLD.doc->>'Runnable', OLD.doc->'Meta'->>'redirect-endpoint')
        IS DISTINCT FROM (NEW.doc->>'Name', NEW.doc->>'Address', NEW.doc->>'Runnable', NEW.doc->'Meta'->>'redirect-endpoint'))
    EXECUTE FUNCTION dns_changed();
-- Leases: an active lease of a machine gives it a record; renewals change nothing.
-- Only a lease naming a machine shows in the zones, so a rack's uploads of anonymous leases
-- change neither the serial nor, through it, the rack's own config.
CREATE TRIGGER leases_dns AFTER INSERT ON leases
    FOR EACH ROW WHEN (coalesce(NEW.doc->>'MachineRef', '') <> '') EXECUTE FUNCTION dns_changed();
CREATE TRIGGER leases_dns_delete AFTER DELETE ON leases
    FOR EACH ROW WHEN (coalesce(OLD.doc->>'MachineRef', '') <> '') EXECUTE FUNCTION dns_changed();
CREATE TRIGGER leases_dns_update AFTER UPDATE ON leases
    FOR EACH ROW WHEN ((OLD.addr, OLD.doc->>'State', OLD.doc->>'MachineRef')
        IS DISTINCT FROM (NEW.addr, NEW.doc->>'State', NEW.doc->>'MachineRef')
        AND (coalesce(OLD.doc->>'MachineRef', '') <> '' OR coalesce(NEW.doc->>'MachineRef', '') <> ''))
    EXECUTE FUNCTION dns_changed();
-- A ticket spent on an import makes the copy inactive until it closes (the copy is left out
-- of the zones while inactive).
CREATE TRIGGER tickets_dns_update AFTER UPDATE ON tickets
    FOR EACH ROW WHEN ((OLD.used_at, OLD.closed_at) IS DISTINCT FROM (NEW.used_at, NEW.closed_at)) EXECUTE FUNCTION dns_changed();
