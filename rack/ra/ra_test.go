package ra

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"

	"github.com/ironflow/ironflow/internal/netnstest"
	"github.com/ironflow/ironflow/internal/testutil"
)

// TestSolicitationIsAnsweredWithAnEmptyAdvertisement: a host on the veth pair that solicits
// routers gets, from the rack's link-local address with hop limit 255, an advertisement
// with router lifetime 0, M and O clear, no prefix and the rack's MAC.
func TestSolicitationIsAnsweredWithAnEmptyAdvertisement(t *testing.T) {
	srvNS, srvIf, cliNS, cliIf := netnstest.VethPair(t, "ra")
	var r *Responder
	var rackMAC net.HardwareAddr
	netnstest.Run(t, srvNS, func() (err error) {
		ifi, err := net.InterfaceByName(srvIf)
		if err != nil {
			return err
		}
		rackMAC = ifi.HardwareAddr
		r, err = Listen([]string{srvIf}, slog.New(slog.DiscardHandler))
		return err
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	var host *icmp.PacketConn
	netnstest.Run(t, cliNS, func() (err error) {
		host, err = icmp.ListenPacket("ip6:ipv6-icmp", "::")
		return err
	})
	defer host.Close()
	pc := host.IPv6PacketConn()
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeRouterAdvertisement)
	must(t, pc.SetICMPFilter(&f))
	must(t, pc.SetControlMessage(ipv6.FlagHopLimit, true))
	must(t, pc.SetMulticastHopLimit(255))
	rs, err := (&icmp.Message{Type: ipv6.ICMPTypeRouterSolicitation, Body: &icmp.RawBody{Data: make([]byte, 4)}}).Marshal(nil)
	must(t, err)

	// The link-local addresses are usable once duplicate address detection is done: solicit
	// until an answer comes.
	buf := make([]byte, 1500)
	var n int
	var cm *ipv6.ControlMessage
	var src net.Addr
	testutil.Eventually(t, 15*time.Second, "a router advertisement", func() bool {
		if _, err := pc.WriteTo(rs, nil, &net.IPAddr{IP: allRouters, Zone: cliIf}); err != nil {
			return false
		}
		must(t, pc.SetReadDeadline(time.Now().Add(500*time.Millisecond)))
		n, cm, src, err = pc.ReadFrom(buf)
		return err == nil
	})
	ad := buf[:n]
	from := src.(*net.IPAddr).IP
	if n < 16 || ad[0] != byte(ipv6.ICMPTypeRouterAdvertisement) || ad[1] != 0 {
		t.Fatalf("answer %x is not a router advertisement", ad)
	}
	if !from.IsLinkLocalUnicast() || cm == nil || cm.HopLimit != 255 {
		t.Errorf("advertisement from %s with hop limit %v, want a link-local source and 255", from, cm)
	}
	if flags, lifetime := ad[5], binary.BigEndian.Uint16(ad[6:8]); flags != 0 || lifetime != 0 {
		t.Errorf("flags %#x router lifetime %d, want 0 and 0 (no DHCPv6, not a default router)", flags, lifetime)
	}
	if opts := ad[16:]; len(opts) != 8 || opts[0] != 1 || net.HardwareAddr(opts[2:8]).String() != rackMAC.String() {
		t.Errorf("options %x, want only the source link-layer address %s", opts, rackMAC)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
