package integration

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/ironflow/ironflow/region/api"
)

// abuseDomain is the region's default domain in the suite; abuseBigName has more A records
// than a 512-byte UDP answer holds.
const (
	abuseDomain  = "abuse.example."
	abuseBigName = "big." + abuseDomain
)

// abuseZone fills the region's default domain: machine A's name (its reservation) and
// abuseBigName.
func (s *abuseStack) abuseZone(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.admin.Domains().Create(ctx, api.Domain{Name: "abuse.example", Default: true, TTL: 300}); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := s.admin.DNSRecords().Create(ctx, api.DNSRecord{Domain: "abuse.example", Name: "big", Type: "A", Data: fmt.Sprintf("10.202.0.%d", i+1)}); err != nil {
			t.Fatal(err)
		}
	}
}

// exchangeFrom asks server the question m over network from the local address from (the
// zero address: any), and returns the answer.
func exchangeFrom(network string, from netip.Addr, server string, m *mdns.Msg) (*mdns.Msg, error) {
	c := &mdns.Client{Net: network, Timeout: 2 * time.Second, UDPSize: 65535}
	if from.IsValid() {
		c.Dialer = &net.Dialer{Timeout: 2 * time.Second, LocalAddr: localAddr(network, from)}
	}
	r, _, err := c.Exchange(m, server)
	return r, err
}

// udpAnswer sends q to server over UDP and returns the answer as it came, in wire format.
func udpAnswer(t *testing.T, server string, q *mdns.Msg) []byte {
	t.Helper()
	conn, err := net.Dial("udp", server)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wire, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(wire); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65536)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func localAddr(network string, a netip.Addr) net.Addr {
	if network == "tcp" {
		return net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, 0))
	}
	return net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 0))
}

// abuseRegionDNS checks the region's DNS listener: no zone transfer over UDP or to a
// network not allowed, and UDP answers no larger than the client accepts.
func abuseRegionDNS(t *testing.T, s *abuseStack) {
	waitAnswered(t, s.dns, abuseBigName)
	t.Run("UDP answers fit the client's size", func(t *testing.T) {
		for _, size := range []uint16{0, 1232} {
			q := new(mdns.Msg).SetQuestion(abuseBigName, mdns.TypeA)
			limit := mdns.MinMsgSize
			if size > 0 {
				q.SetEdns0(size, false)
				limit = int(size)
			}
			wire := udpAnswer(t, s.dns, q)
			r := new(mdns.Msg)
			if err := r.Unpack(wire); err != nil {
				t.Fatal(err)
			}
			if len(wire) > limit || !r.Truncated {
				t.Errorf("EDNS size %d: an answer of %d bytes (truncated %v), want at most %d and truncated", size, len(wire), r.Truncated, limit)
			}
		}
	})
	t.Run("region DNS refuses AXFR over UDP", func(t *testing.T) {
		r, err := exchangeFrom("udp", netip.Addr{}, s.dns, new(mdns.Msg).SetAxfr(abuseDomain))
		if err != nil {
			t.Fatal(err)
		}
		if r.Rcode != mdns.RcodeRefused && r.Rcode != mdns.RcodeNotImplemented || len(r.Answer) > 0 {
			t.Errorf("AXFR over UDP: %s with %d records, want REFUSED or NOTIMP and none", mdns.RcodeToString[r.Rcode], len(r.Answer))
		}
	})
	t.Run("region DNS refuses AXFR from networks not allowed", func(t *testing.T) {
		// The region's config in startAbuseStack lets 127.0.0.1 alone transfer zones;
		// abuseOutsider is another loopback address.
		if n := axfrRecords(t, netip.MustParseAddr("127.0.0.1"), s.dns); n == 0 {
			t.Errorf("AXFR over TCP from the allowed 127.0.0.1: no records")
		}
		if n := axfrRecords(t, abuseOutsider(), s.dns); n > 0 {
			t.Errorf("AXFR over TCP from %s: the zone's %d records", abuseOutsider(), n)
		}
	})
}

// axfrRecords asks server for a transfer of abuseDomain over TCP from the address from and
// counts the records that came.
func axfrRecords(t *testing.T, from netip.Addr, server string) int {
	t.Helper()
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: localAddr("tcp", from)}
	conn, err := d.Dial("tcp", server)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tr := &mdns.Transfer{Conn: &mdns.Conn{Conn: conn}, ReadTimeout: 2 * time.Second}
	envelopes, err := tr.In(new(mdns.Msg).SetAxfr(abuseDomain), server)
	if err != nil {
		t.Fatal(err)
	}
	records := 0
	for e := range envelopes {
		records += len(e.RR)
	}
	return records
}

// waitAnswered waits until the DNS server at addr answers name (the region
// rebuilds its zones at most every second).
func waitAnswered(t *testing.T, addr, name string) {
	t.Helper()
	pollUntil(t, 10*time.Second, "DNS answers "+name, func() (bool, error) {
		r, err := exchangeFrom("tcp", netip.Addr{}, addr, new(mdns.Msg).SetQuestion(name, mdns.TypeA))
		return err == nil && r.Rcode == mdns.RcodeSuccess && len(r.Answer) > 0, err
	})
}
