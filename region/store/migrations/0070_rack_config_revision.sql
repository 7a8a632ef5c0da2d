-- The revision of what racks serve. Every transaction that changes a rack's config (racks,
-- VLANs, subnets, the fields of machines that make reservations, leases) bumps it once, so a
-- region process caches each rack's config by revision instead of rebuilding it on every
-- poll, and racks long-poll for a change. static_revision is the last revision that changed
-- more than leases: a change of leases alone refreshes only the leases of a cached config.
CREATE TABLE rack_config_revision (
    singleton       boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    revision        bigint NOT NULL,
    static_revision bigint NOT NULL
);
INSERT INTO rack_config_revision (revision, static_revision) VALUES (1, 1);

-- Called by deferred constraint triggers, so the counter's row is locked at commit, after the
-- transaction took its other locks (no deadlock with them, and held only while committing).
-- TG_ARGV[0] is 'static' or 'leases'; the transaction-local setting remembers what this
-- transaction already bumped, so a batch of a thousand leases bumps once.
CREATE FUNCTION bump_rack_config_revision() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    done   text    := coalesce(current_setting('ironflow.rack_config_bumped', true), '');
    static boolean := TG_ARGV[0] = 'static';
BEGIN
    IF done = 'static' OR (done = 'leases' AND NOT static) THEN
        RETURN NULL;
    END IF;
    IF done = 'leases' THEN
        UPDATE rack_config_revision SET static_revision = revision;
    ELSIF static THEN
        UPDATE rack_config_revision SET revision = revision + 1, static_revision = revision + 1;
    ELSE
        UPDATE rack_config_revision SET revision = revision + 1;
    END IF;
    PERFORM set_config('ironflow.rack_config_bumped', TG_ARGV[0], true);
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER rack_config_vlans AFTER INSERT OR UPDATE OR DELETE ON vlans
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bump_rack_config_revision('static');
CREATE CONSTRAINT TRIGGER rack_config_subnets AFTER INSERT OR UPDATE OR DELETE ON subnets
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bump_rack_config_revision('static');

-- A rack's config carries the rack without what heartbeats change (LastSeen, Status, two Meta
-- keys), so heartbeats bump nothing.
CREATE CONSTRAINT TRIGGER rack_config_racks AFTER INSERT OR DELETE ON racks
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bump_rack_config_revision('static');
CREATE CONSTRAINT TRIGGER rack_config_racks_update AFTER UPDATE ON racks
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN ((OLD.doc - 'LastSeen' - 'Status') #- '{Meta,status-reason}' #- '{Meta,current-region}'
        IS DISTINCT FROM (NEW.doc - 'LastSeen' - 'Status') #- '{Meta,status-reason}' #- '{Meta,current-region}')
    EXECUTE FUNCTION bump_rack_config_revision('static');

-- Reservations are made of a machine's name, MACs, address and boot env; agents' check-ins
-- and jobs change none of them.
CREATE CONSTRAINT TRIGGER rack_config_machines AFTER INSERT OR DELETE ON machines
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bump_rack_config_revision('static');
CREATE CONSTRAINT TRIGGER rack_config_machines_update AFTER UPDATE ON machines
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN ((OLD.name, OLD.doc->'HardwareAddrs', OLD.doc->'Address', OLD.doc->'BootEnv')
        IS DISTINCT FROM (NEW.name, NEW.doc->'HardwareAddrs', NEW.doc->'Address', NEW.doc->'BootEnv'))
    EXECUTE FUNCTION bump_rack_config_revision('static');

CREATE CONSTRAINT TRIGGER rack_config_leases AFTER INSERT OR DELETE ON leases
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bump_rack_config_revision('leases');
CREATE CONSTRAINT TRIGGER rack_config_leases_update AFTER UPDATE ON leases
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (OLD.doc IS DISTINCT FROM NEW.doc)
    EXECUTE FUNCTION bump_rack_config_revision('leases');
