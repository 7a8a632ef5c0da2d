package store_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	regiondns "github.com/ironflow/ironflow/region/dns"
	"github.com/ironflow/ironflow/region/store"
)

func dnsData(t *testing.T, s *store.Store) regiondns.Data {
	t.Helper()
	d, err := s.DNSData(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDNSDataAndSerial: the zones' data follows the region's objects, the serial changes
// with every change the zones show and with nothing else, and a second region process on the
// same database reads the same serial.
func TestDNSDataAndSerial(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	ctx := context.Background()
	mustCreate(t, s, api.KindDomains, &api.Domain{Name: "A.Example", Default: true, Upstreams: []string{"192.0.2.53"}})
	mustCreate(t, s, api.KindSubnets, &api.Subnet{Name: "net", CIDR: "10.5.0.0/16"})
	m := &api.Machine{Name: "birdy", Address: "10.5.0.7"}
	mustCreate(t, s, api.KindMachines, m)
	mustCreate(t, s, api.KindDNSRecords, &api.DNSRecord{Domain: "a.example", Name: "www", Type: "cname", Data: "birdy.a.example"})
	// An address with an IPv6 zone is a valid machine Address but no inet: left out.
	mustCreate(t, s, api.KindMachines, &api.Machine{Name: "zoned", Address: "fe80::1%eth0"})

	d1 := dnsData(t, s)
	if want := []regiondns.Host{{Name: "birdy", Addr: netip.MustParseAddr("10.5.0.7")}}; !slices.Equal(d1.Hosts, want) {
		t.Fatalf("hosts %v, want %v", d1.Hosts, want)
	}
	if len(d1.Domains) != 1 || d1.Domains[0].Name != "a.example" || d1.Domains[0].Upstreams[0] != "192.0.2.53:53" {
		t.Fatalf("domains %+v: want a.example, lower-cased, with its upstream on port 53", d1.Domains)
	}
	if len(d1.Records) != 1 || d1.Records[0].Type != "CNAME" {
		t.Fatalf("records %+v", d1.Records)
	}

	other, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if d := dnsData(t, other); d.Serial != d1.Serial {
		t.Fatalf("a second process reads serial %d, the first %d", d.Serial, d1.Serial)
	}

	m.Description = "not in any zone"
	if err := s.Replace(ctx, alice, api.KindMachines, m.Uuid, m); err != nil {
		t.Fatal(err)
	}
	if d := dnsData(t, s); d.Serial != d1.Serial {
		t.Fatalf("a change the zones do not show moved the serial from %d to %d", d1.Serial, d.Serial)
	}
	m.Address = "10.5.0.8"
	if err := s.Replace(ctx, alice, api.KindMachines, m.Uuid, m); err != nil {
		t.Fatal(err)
	}
	d2 := dnsData(t, s)
	if d2.Serial == d1.Serial || d2.Hosts[0].Addr != netip.MustParseAddr("10.5.0.8") {
		t.Fatalf("after the address changed: serial %d (was %d), hosts %v", d2.Serial, d1.Serial, d2.Hosts)
	}

	if err := s.CompactDNSChanges(ctx); err != nil {
		t.Fatal(err)
	}
	if d := dnsData(t, s); d.Serial != d2.Serial {
		t.Fatalf("compaction moved the serial from %d to %d", d2.Serial, d.Serial)
	}
	m.Address = "10.5.0.7"
	if err := s.Replace(ctx, alice, api.KindMachines, m.Uuid, m); err != nil {
		t.Fatal(err)
	}
	d2 = dnsData(t, s)
	var rows int
	if err := s.DB().QueryRow(ctx, "SELECT count(*) FROM dns_changes").Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("change rows after compaction and one change: %d, %v", rows, err)
	}

	region, err := s.Identity(ctx, "region-a")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rackConfigDNS(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Serial != d2.Serial || cfg.Region != region || d2.Hosts[0].Addr != netip.MustParseAddr("10.5.0.7") || cfg.Domain != "a.example" || !slices.Equal(cfg.Zones, []string{"5.10.in-addr.arpa.", "a.example."}) ||
		!slices.Equal(cfg.Upstreams, []string{"192.0.2.53:53"}) {
		t.Fatalf("rack config DNS %+v", cfg)
	}
}

// rackConfigDNS registers a rack and returns the DNS part of its config.
func rackConfigDNS(t *testing.T, s *store.Store) (api.RackDNS, error) {
	t.Helper()
	rack, _, err := s.RegisterRack(context.Background(), api.RackRegistration{Name: "rack-dns"}, []string{"http://region.example"}, true)
	if err != nil {
		return api.RackDNS{}, err
	}
	cfg, _, err := s.RackConfig(context.Background(), rack.Uuid)
	return cfg.DNS, err
}

// TestDNSBadInput: invalid labels, record data and domain settings are refused, naming
// the problem, and nothing is stored.
func TestDNSBadInput(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	mustCreate(t, s, api.KindDomains, &api.Domain{Name: "a.example", Default: true})
	mustCreate(t, s, api.KindDNSRecords, &api.DNSRecord{Domain: "a.example", Name: "www", Type: "CNAME", Data: "birdy.a.example"})
	cases := []struct {
		kind  string
		obj   any
		class error
		want  string
	}{
		{api.KindDomains, &api.Domain{Name: "bad_label.example"}, store.ErrInvalid, `label "bad_label" holds '_'`},
		{api.KindDomains, &api.Domain{Name: "-x.example"}, store.ErrInvalid, "starts or ends with a hyphen"},
		{api.KindDomains, &api.Domain{Name: "b.example", Default: true}, store.ErrConflict, "domain a.example is already the default"},
		{api.KindDomains, &api.Domain{Name: "c.example", Upstreams: []string{"192.0.2.1"}}, store.ErrInvalid, "is not the Default domain"},
		{api.KindDNSRecords, &api.DNSRecord{Domain: "a.example", Name: "x", Type: "MX", Data: "10 mail"}, store.ErrInvalid, `Type "MX" is not one of`},
		{api.KindDNSRecords, &api.DNSRecord{Domain: "a.example", Name: "x y", Type: "A", Data: "10.0.0.1"}, store.ErrInvalid, `label "x y"`},
		{api.KindDNSRecords, &api.DNSRecord{Domain: "a.example", Name: "x", Type: "A", Data: "::1"}, store.ErrInvalid, "not an IPv4 address"},
		{api.KindDNSRecords, &api.DNSRecord{Domain: "a.example", Name: "x", Type: "SRV", Data: "1 2 70000 t.example"}, store.ErrInvalid, "port"},
		{api.KindDNSRecords, &api.DNSRecord{Domain: "a.example", Name: "x", Type: "TXT", Data: "a\nb"}, store.ErrInvalid, "control character"},
		{api.KindDNSRecords, &api.DNSRecord{Domain: "a.example", Name: "www", Type: "A", Data: "10.0.0.1"}, store.ErrConflict, "a CNAME must be the only record"},
		{api.KindDNSRecords, &api.DNSRecord{Domain: "nowhere.example", Name: "x", Type: "A", Data: "10.0.0.1"}, store.ErrInvalid, `domain "nowhere.example" does not exist`},
	}
	for _, c := range cases {
		wantErr(t, s.Create(ctx, alice, c.kind, c.obj), c.class, c.want)
	}
	var recs []api.DNSRecord
	if err := s.List(ctx, api.KindDNSRecords, store.ListOptions{}, &recs); err != nil || len(recs) != 1 {
		t.Fatalf("records after refusals: %v, %v", recs, err)
	}
	wantDependents(t, s.Delete(ctx, alice, api.KindDomains, "a.example", false), "dnsrecord www CNAME")
}
