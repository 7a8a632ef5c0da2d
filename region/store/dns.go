package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
	regiondns "github.com/ironflow/ironflow/region/dns"
)

// maxUpstreams bounds the resolvers a region names.
const maxUpstreams = 8

var domains = newKind(kind[api.Domain]{
	name: api.KindDomains, noun: "domain", table: "domains",
	self:  func(d *api.Domain) *string { return &d.Name },
	bare:  "name",
	keys:  map[string]string{"Name": "name = $1"},
	norm:  map[string]func(string) (string, error){"Name": lowerName},
	order: "name",
	columns: func(d *api.Domain) []column {
		return []column{{"name", d.Name}, {"is_default", d.Default}}
	},
	prepare: func(d, _ *api.Domain) {
		d.Name = strings.ToLower(d.Name)
		if d.Upstreams == nil {
			d.Upstreams = []string{}
		}
	},
	validate: validateDomain,
	deps:     []dependents{"SELECT 'dnsrecord ' || name || ' ' || (doc->>'Type') FROM dnsrecords WHERE domain = $1 ORDER BY name, seq"},
})

func lowerName(s string) (string, error) { return strings.ToLower(s), nil }

func validateDomain(d *api.Domain) error {
	if err := regiondns.CheckName(d.Name, false); err != nil {
		return invalidf("domain Name: %v", err)
	}
	noun := "domain " + d.Name
	if d.TTL < 0 || d.TTL > 1<<31-1 {
		return invalidf("%s TTL %d is outside 0-2147483647", noun, d.TTL)
	}
	if len(d.Upstreams) > 0 && !d.Default {
		return invalidf("%s names Upstreams but is not the Default domain: the region's upstream resolvers are set on its default domain", noun)
	}
	if len(d.Upstreams) > maxUpstreams {
		return invalidf("%s names %d Upstreams, at most %d", noun, len(d.Upstreams), maxUpstreams)
	}
	for i, u := range d.Upstreams {
		ap, err := upstream(u)
		if err != nil {
			return invalidf("%s Upstreams: %v", noun, err)
		}
		d.Upstreams[i] = ap.String()
	}
	return uniqueStrings(noun, "Upstreams", d.Upstreams)
}

// upstream parses a resolver address, "ip" (port 53) or "ip:port".
func upstream(s string) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return netip.AddrPortFrom(a, 53), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Addr().Zone() != "" || ap.Port() == 0 {
		return netip.AddrPort{}, fmt.Errorf("%q is not an address or address:port", s)
	}
	return ap, nil
}

var dnsRecords = newKind(kind[api.DNSRecord]{
	name: api.KindDNSRecords, noun: "dnsrecord", table: "dnsrecords",
	self:    func(r *api.DNSRecord) *string { return &r.Uuid },
	genUUID: true, bare: "uuid",
	keys:  map[string]string{"Uuid": "uuid = $1::uuid", "Domain": "domain = $1", "Name": "name = $1"},
	norm:  map[string]func(string) (string, error){"Uuid": normUUID, "Domain": lowerName, "Name": lowerName},
	order: "domain, name, seq",
	columns: func(r *api.DNSRecord) []column {
		return []column{{"uuid", r.Uuid}, {"domain", r.Domain}, {"name", r.Name}}
	},
	prepare: func(r, _ *api.DNSRecord) {
		r.Domain, r.Name, r.Type = strings.ToLower(r.Domain), strings.ToLower(r.Name), strings.ToUpper(r.Type)
	},
	validate: func(r *api.DNSRecord) error {
		if _, err := regiondns.CheckRecord(*r, 0); err != nil {
			return invalidf("dnsrecord %s %s: %v", r.Name, r.Type, err)
		}
		return nil
	},
	check: aloneWithCNAME,
})

// aloneWithCNAME refuses a CNAME next to other records of its name, and any record next to
// a CNAME (RFC 1034 3.6.2).
func aloneWithCNAME(ctx context.Context, tx pgx.Tx, r, _ *api.DNSRecord) error {
	var other string
	err := tx.QueryRow(ctx, `SELECT doc->>'Type' FROM dnsrecords WHERE domain = $1 AND name = $2 AND uuid <> $3::uuid
		AND ($4 = 'CNAME' OR doc->>'Type' = 'CNAME') LIMIT 1`, r.Domain, r.Name, r.Uuid, r.Type).Scan(&other)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return conflictf("%s already has a %s record: a CNAME must be the only record of its name", regiondns.Owner(*r), other)
}

// dnsCompactAfter is how many change rows make DNSData fold them into the serial's base.
const dnsCompactAfter = 10000

// DNSData reads what the region's zones derive from, in one snapshot: the serial, domains,
// operator records, every machine's addresses (its reservation and active leases naming it)
// and the subnets. Migrated stubs and inactive imported copies are left out: a machine is in
// the zones of the region where it is active.
func (s *Store) DNSData(ctx context.Context) (regiondns.Data, error) {
	if err := s.compactDNSChanges(ctx, dnsCompactAfter); err != nil {
		return regiondns.Data{}, err
	}
	var d regiondns.Data
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if d.Serial, err = dnsSerial(ctx, tx); err != nil {
			return err
		}
		if err := domains.list(ctx, tx, ListOptions{}, &d.Domains); err != nil {
			return err
		}
		if err := dnsRecords.list(ctx, tx, ListOptions{}, &d.Records); err != nil {
			return err
		}
		if d.Hosts, err = dnsHosts(ctx, tx); err != nil {
			return err
		}
		d.Subnets, err = allSubnets(ctx, tx)
		return err
	})
	return d, classify(err)
}

// dnsSerial is the SOA serial of the snapshot: the base plus the change rows it sees, in
// RFC 1982 arithmetic (wrapping at 2^32).
func dnsSerial(ctx context.Context, q querier) (uint32, error) {
	var n int64
	err := q.QueryRow(ctx, "SELECT n + (SELECT count(*) FROM dns_changes) FROM dns_serial_base").Scan(&n)
	return uint32(n), err
}

// compactDNSChanges folds the change rows into the base when there are more than after; the
// serial a snapshot computes is the same before and after. The readers of the serial (DNS
// data, rack configs) call it, so the rows stay few however many changes are made.
func (s *Store) compactDNSChanges(ctx context.Context, after int) error {
	var many bool
	if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM dns_changes OFFSET $1)", after).Scan(&many); err != nil {
		return classify(fmt.Errorf("count DNS changes: %w", err))
	}
	if !many {
		return nil
	}
	_, err := s.pool.Exec(ctx, `WITH gone AS (DELETE FROM dns_changes RETURNING 1)
		UPDATE dns_serial_base SET n = n + (SELECT count(*) FROM gone)`)
	return classify(err)
}

// activeMachinesSQL selects the machines active on this region: not a migrated stub, not an
// imported copy waiting for its activation.
const activeMachinesSQL = `SELECT m.uuid, m.name, m.doc FROM machines m
	WHERE coalesce(m.doc->'Meta'->>'redirect-endpoint', '') = ''
	AND NOT ((m.doc->>'Runnable')::boolean IS NOT TRUE AND EXISTS (SELECT 1 FROM tickets t
		WHERE t.machine = m.uuid AND t.used_at IS NOT NULL AND t.closed_at IS NULL))`

// dnsHosts lists the addresses of active machines: their reservation (Address) and the
// active leases that name them, by machine name then address. An Address PostgreSQL cannot
// read as inet (an IPv6 zone, which netip accepts) is left out rather than failing the zones.
func dnsHosts(ctx context.Context, tx pgx.Tx) ([]regiondns.Host, error) {
	rows, err := tx.Query(ctx, `WITH am AS (`+activeMachinesSQL+`)
		SELECT name, addr FROM (
			SELECT am.name, CASE WHEN am.doc->>'Address' ~ '^[0-9A-Fa-f:.]+$' THEN (am.doc->>'Address')::inet END AS addr FROM am
			UNION
			SELECT am.name, l.addr FROM leases l JOIN am ON l.doc->>'MachineRef' = am.uuid::text
			WHERE l.doc->>'State' = 'active'
		) h WHERE addr IS NOT NULL ORDER BY name, addr`)
	if err != nil {
		return nil, err
	}
	var out []regiondns.Host
	for rows.Next() {
		var h regiondns.Host
		if err := rows.Scan(&h.Name, &h.Addr); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

func allSubnets(ctx context.Context, tx pgx.Tx) ([]netip.Prefix, error) {
	rows, err := tx.Query(ctx, "SELECT cidr FROM subnets ORDER BY cidr")
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for rows.Next() {
		var p netip.Prefix
		if err := rows.Scan(&p); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// rackDNS is the DNS part of a rack's config, read in the config's snapshot.
func rackDNS(ctx context.Context, tx pgx.Tx) (api.RackDNS, error) {
	out := api.RackDNS{Zones: []string{}, Upstreams: []string{}}
	var err error
	if out.Serial, err = dnsSerial(ctx, tx); err != nil {
		return out, err
	}
	if err := tx.QueryRow(ctx, "SELECT COALESCE((SELECT uuid::text FROM region_identity), '')").Scan(&out.Region); err != nil {
		return out, err
	}
	var ds []api.Domain
	if err := domains.list(ctx, tx, ListOptions{}, &ds); err != nil {
		return out, err
	}
	subnets, err := allSubnets(ctx, tx)
	if err != nil {
		return out, err
	}
	out.Zones = regiondns.ZoneNames(ds, subnets)
	out.Domain = regiondns.DefaultDomain(ds)
	for _, d := range ds {
		if d.Name == out.Domain {
			out.Upstreams = append(out.Upstreams, d.Upstreams...)
		}
	}
	return out, nil
}
