-- A rack's config carries the DNS section (region/store/dns.go rackDNS): its zones and
-- upstreams come from domains and subnets, its serial from dns_changes. A change of domains
-- is a static change; a new change row (a record, a lease, a migration) refreshes the
-- dynamic sections (leases and DNS) of a cached config, so a rack sees the new serial and
-- drops its cached answers within one poll.
CREATE CONSTRAINT TRIGGER rack_config_domains AFTER INSERT OR UPDATE OR DELETE ON domains
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bump_rack_config_revision('static');
CREATE CONSTRAINT TRIGGER rack_config_dns_changes AFTER INSERT ON dns_changes
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bump_rack_config_revision('leases');
