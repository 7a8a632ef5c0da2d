package dns

import (
	"context"
	"net/netip"
	"testing"

	mdns "github.com/miekg/dns"
)

// FuzzHandle feeds the rack's DNS handler every message miekg/dns can decode, from a served
// client and from an outsider, over UDP and TCP: it must answer each with a reply to that
// message (its ID) that packs, and never panic. Names outside the region's zones are refused (no
// upstream), so nothing leaves the process.
func FuzzHandle(f *testing.F) {
	for _, q := range []*mdns.Msg{
		new(mdns.Msg).SetQuestion("birdy.a.example.", mdns.TypeA),
		new(mdns.Msg).SetQuestion("7.0.5.10.in-addr.arpa.", mdns.TypePTR),
		new(mdns.Msg).SetQuestion("a.example.", mdns.TypeAXFR),
		new(mdns.Msg).SetQuestion("example.com.", mdns.TypeANY),
	} {
		raw, err := q.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw, true, false)
	}
	s, _, _ := newTestServer(f, 64)
	f.Fuzz(func(t *testing.T, raw []byte, served, tcp bool) {
		req := new(mdns.Msg)
		if req.Unpack(raw) != nil {
			return
		}
		src := outside
		if served {
			src = netip.MustParseAddr("10.5.0.99")
		}
		m := s.Handle(context.Background(), req, src, tcp)
		if m == nil || m.Id != req.Id || !m.Response {
			t.Fatalf("reply %v to %v", m, req)
		}
		if _, err := m.Pack(); err != nil {
			t.Fatalf("reply does not pack: %v\n%v", err, m)
		}
	})
}
