package dns

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
)

type staticSource Data

func (s staticSource) DNSData(context.Context) (Data, error) { return Data(s), nil }

// manyAddrs is a name with 200 A records: 3 kB and more of answer.
const manyAddrs = "many.a.example."

// listen runs a region DNS listener on loopback over data with manyAddrs until the test
// ends, and returns its address.
func listen(t *testing.T, transferFrom TransferFrom) string {
	t.Helper()
	d := Data{Serial: 1, Domains: []api.Domain{{Name: "a.example", Default: true}}}
	for i := range 200 {
		d.Records = append(d.Records, api.DNSRecord{Domain: "a.example", Name: "many", Type: "A", Data: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)})
		d.Hosts = append(d.Hosts, Host{Name: fmt.Sprintf("host%d", i), Addr: netip.AddrFrom4([4]byte{10, 1, byte(i / 250), byte(i%250 + 1)})})
	}
	s := NewServer(staticSource(d), time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	addr := testutil.FreeDNSAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ListenAndServe(ctx, addr, transferFrom) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	testutil.Eventually(t, 5*time.Second, "the DNS listener answers", func() bool {
		_, _, err := exchange("tcp", addr, "a.example.", mdns.TypeSOA, 0)
		return err == nil
	})
	return addr
}

// exchange sends one query; edns 0 sends it without EDNS. It returns the answer and its
// size on the wire.
func exchange(network, addr, name string, qtype, edns uint16) (*mdns.Msg, int, error) {
	q := new(mdns.Msg).SetQuestion(name, qtype)
	if edns > 0 {
		q.SetEdns0(edns, false)
	}
	conn, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	co := &mdns.Conn{Conn: conn, UDPSize: mdns.MaxMsgSize}
	if err := co.WriteMsg(q); err != nil {
		return nil, 0, err
	}
	raw, err := co.ReadMsgHeader(nil)
	if err != nil {
		return nil, 0, err
	}
	m := new(mdns.Msg)
	return m, len(raw), m.Unpack(raw)
}

// TestUDPAnswersFitTheClientsSize: over UDP an answer is at most 512 bytes without EDNS and
// at most the client's EDNS size, capped at MaxUDPAnswer, with the TC bit when records were
// left out; over TCP it is whole.
func TestUDPAnswersFitTheClientsSize(t *testing.T) {
	addr := listen(t, nil)
	for _, c := range []struct {
		edns uint16
		max  int
	}{{0, 512}, {1000, 1000}, {4096, MaxUDPAnswer}, {65535, MaxUDPAnswer}} {
		m, n, err := exchange("udp", addr, manyAddrs, mdns.TypeA, c.edns)
		if err != nil {
			t.Fatalf("EDNS %d: %v", c.edns, err)
		}
		if n > c.max || !m.Truncated || len(m.Answer) == 0 {
			t.Errorf("EDNS %d: %d bytes, %d records, truncated %v; want at most %d bytes with TC", c.edns, n, len(m.Answer), m.Truncated, c.max)
		}
	}
	m, _, err := exchange("tcp", addr, manyAddrs, mdns.TypeA, 0)
	if err != nil || len(m.Answer) != 200 || m.Truncated {
		t.Fatalf("over TCP: %v, %v", m, err)
	}
}

// TestZoneTransfersOnlyOverTCPFromAllowedNetworks: a zone transfer over UDP is refused; over
// TCP it is served to loopback by default and refused to a client outside the networks the
// operator names; by default a rack's heartbeat address may transfer too.
func TestZoneTransfersOnlyOverTCPFromAllowedNetworks(t *testing.T) {
	byDefault := listen(t, nil)
	if m, _, err := exchange("udp", byDefault, "a.example.", mdns.TypeAXFR, 4096); err != nil || m.Rcode != mdns.RcodeRefused || len(m.Answer) != 0 {
		t.Fatalf("AXFR over UDP: %v, %v", m, err)
	}
	if m, _, err := exchange("tcp", byDefault, "a.example.", mdns.TypeAXFR, 0); err != nil || m.Rcode != mdns.RcodeSuccess || len(m.Answer) < 400 {
		t.Fatalf("AXFR over TCP from loopback by default: %v, %v", m, err)
	}
	elsewhere := listen(t, TransferFrom{netip.MustParsePrefix("10.0.0.0/8")})
	if m, _, err := exchange("tcp", elsewhere, "a.example.", mdns.TypeAXFR, 0); err != nil || m.Rcode != mdns.RcodeRefused || len(m.Answer) != 0 {
		t.Fatalf("AXFR over TCP from outside the allowed networks: %v, %v", m, err)
	}
	if m, _, err := exchange("tcp", elsewhere, manyAddrs, mdns.TypeA, 0); err != nil || len(m.Answer) != 200 {
		t.Fatalf("an ordinary query from outside the transfer networks: %v, %v", m, err)
	}

	l := listener{s: NewServer(staticSource{}, 0, slog.New(slog.NewTextHandler(io.Discard, nil)))}
	rack, other := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 5)}, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 6)}
	l.s.RackSeen("rack-1", netip.MustParseAddr("192.0.2.5"))
	if !l.mayTransfer(rack) || l.mayTransfer(other) || l.mayTransfer(&net.UDPAddr{IP: rack.IP}) {
		t.Fatal("by default, only a rack's heartbeat address may transfer, and only over TCP")
	}
}

func TestParseTransferFrom(t *testing.T) {
	for _, c := range []struct {
		in   string
		want TransferFrom
	}{
		{"", nil},
		{"none", TransferFrom{}},
		{"10.1.2.0/16, 192.0.2.7,::1", TransferFrom{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("::1/128")}},
	} {
		got, err := ParseTransferFrom(c.in)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%q: %v %v, want %v", c.in, got, err, c.want)
		}
	}
	if _, err := ParseTransferFrom("10.0.0.0/8,racks"); err == nil {
		t.Error("a name that is no network accepted")
	}
}
