package dns

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	mdns "github.com/miekg/dns"

	"github.com/ironflow/ironflow/region/api"
)

func testZones() *Zones {
	return Build(Data{
		Serial:  7,
		Domains: []api.Domain{{Name: "b.example"}, {Name: "a.example", Default: true, TTL: 60}},
		Records: []api.DNSRecord{
			{Domain: "a.example", Name: "www", Type: "CNAME", Data: "birdy.a.example"},
			{Domain: "a.example", Name: "_ldap._tcp", Type: "SRV", Data: "0 5 389 birdy.a.example."},
			{Domain: "a.example", Name: "@", Type: "TXT", Data: `v=spf1 "quoted" \ -all`},
			{Domain: "b.example", Name: "ext", Type: "AAAA", Data: "2001:db8::1"},
			{Domain: "gone.example", Name: "x", Type: "A", Data: "10.0.0.1"},
		},
		Hosts: []Host{
			{Name: "birdy", Addr: netip.MustParseAddr("10.5.0.7")},
			{Name: "Bad_Name", Addr: netip.MustParseAddr("10.5.0.8")},
		},
		Subnets: []netip.Prefix{netip.MustParsePrefix("10.5.0.0/16"), netip.MustParsePrefix("192.168.7.64/26")},
	})
}

func ask(z *Zones, name string, qtype uint16) *mdns.Msg {
	return z.Answer(new(mdns.Msg).SetQuestion(name, qtype))
}

func answers(m *mdns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		out = append(out, strings.ReplaceAll(rr.String(), "\t", " "))
	}
	return out
}

func TestZonesAnswer(t *testing.T) {
	z := testZones()
	if want := []string{"a.example.", "b.example.", "5.10.in-addr.arpa.", "7.168.192.in-addr.arpa."}; !sameSet(z.Origins(), want) {
		t.Fatalf("zones %v, want %v", z.Origins(), want)
	}
	cases := []struct {
		name  string
		qtype uint16
		rcode int
		want  []string
	}{
		{"birdy.a.example.", mdns.TypeA, mdns.RcodeSuccess, []string{"birdy.a.example. 60 IN A 10.5.0.7"}},
		{"BIRDY.A.EXAMPLE.", mdns.TypeA, mdns.RcodeSuccess, []string{"birdy.a.example. 60 IN A 10.5.0.7"}},
		{"7.0.5.10.in-addr.arpa.", mdns.TypePTR, mdns.RcodeSuccess, []string{"7.0.5.10.in-addr.arpa. 30 IN PTR birdy.a.example."}},
		{"www.a.example.", mdns.TypeA, mdns.RcodeSuccess, []string{"www.a.example. 60 IN CNAME birdy.a.example.", "birdy.a.example. 60 IN A 10.5.0.7"}},
		{"_ldap._tcp.a.example.", mdns.TypeSRV, mdns.RcodeSuccess, []string{"_ldap._tcp.a.example. 60 IN SRV 0 5 389 birdy.a.example."}},
		{"a.example.", mdns.TypeTXT, mdns.RcodeSuccess, []string{`a.example. 60 IN TXT "v=spf1 \"quoted\" \\ -all"`}},
		{"ext.b.example.", mdns.TypeAAAA, mdns.RcodeSuccess, []string{"ext.b.example. 30 IN AAAA 2001:db8::1"}},
		{"birdy.a.example.", mdns.TypeAAAA, mdns.RcodeSuccess, nil},   // NODATA
		{"_tcp.a.example.", mdns.TypeA, mdns.RcodeSuccess, nil},       // empty non-terminal
		{"nobody.a.example.", mdns.TypeA, mdns.RcodeNameError, nil},   // NXDOMAIN
		{"bad_name.a.example.", mdns.TypeA, mdns.RcodeNameError, nil}, // not a host name: left out
		{"x.gone.example.", mdns.TypeA, mdns.RcodeRefused, nil},       // not ours
		{"example.com.", mdns.TypeA, mdns.RcodeRefused, nil},
	}
	for _, c := range cases {
		m := ask(z, c.name, c.qtype)
		if m.Rcode != c.rcode || !slices.Equal(answers(m), c.want) {
			t.Errorf("%s %s: rcode %s answers %q, want %s %q", c.name, mdns.TypeToString[c.qtype], mdns.RcodeToString[m.Rcode], answers(m),
				mdns.RcodeToString[c.rcode], c.want)
		}
		if c.rcode != mdns.RcodeRefused && c.want == nil && (len(m.Ns) != 1 || m.Ns[0].(*mdns.SOA).Serial != 7) {
			t.Errorf("%s: a negative answer carries the zone's SOA with the serial, got %v", c.name, m.Ns)
		}
	}
	if z.Skipped != 1 {
		t.Errorf("Skipped %d, want 1 (Bad_Name)", z.Skipped)
	}
	axfr := ask(z, "a.example.", mdns.TypeAXFR)
	if n := len(axfr.Answer); n < 5 || axfr.Answer[0].Header().Rrtype != mdns.TypeSOA || axfr.Answer[n-1].Header().Rrtype != mdns.TypeSOA {
		t.Fatalf("AXFR: %v", answers(axfr))
	}
}

func TestCheckRecordRefusesInjection(t *testing.T) {
	for _, r := range []api.DNSRecord{
		{Domain: "a.example", Name: "x", Type: "CNAME", Data: "t.example. 30 IN A 1.2.3.4"},
		{Domain: "a.example", Name: "x", Type: "SRV", Data: "1 2 3 t.example\nevil 30 IN A 1.2.3.4"},
		{Domain: "a.example", Name: "x.", Type: "A", Data: "10.0.0.1"},
		{Domain: "a.example", Name: "@", Type: "CNAME", Data: "t.example"},
		{Domain: "a.example", Name: strings.Repeat("a", 64), Type: "A", Data: "10.0.0.1"},
	} {
		if _, err := CheckRecord(r, 30); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
}

func TestReverseZone(t *testing.T) {
	for p, want := range map[string]string{
		"10.5.0.0/16":     "5.10.in-addr.arpa.",
		"10.5.3.0/24":     "3.5.10.in-addr.arpa.",
		"192.168.7.64/26": "7.168.192.in-addr.arpa.",
		"172.16.0.0/12":   "172.in-addr.arpa.",
		"2001:db8:1::/48": "1.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.",
		"2001:db8:1::/52": "0.1.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.",
	} {
		if got := ReverseZone(netip.MustParsePrefix(p)); got != want {
			t.Errorf("ReverseZone(%s) = %s, want %s", p, got, want)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
