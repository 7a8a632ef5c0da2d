package dhcp

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// TestServeForPerfdhcp is the Ironflow side of scripts/bench-dhcp-vs-kea.sh: with
// IRONFLOW_DHCP_BENCH_SERVE=ip:port it serves relayed DHCP there, with durable leases in a
// temporary directory, for the subnet IRONFLOW_DHCP_BENCH_SUBNET (its addresses from .1.0 on
// are the dynamic range), until SIGTERM. Otherwise it is skipped.
func TestServeForPerfdhcp(t *testing.T) {
	listen := os.Getenv("IRONFLOW_DHCP_BENCH_SERVE")
	if listen == "" {
		t.Skip("server process of scripts/bench-dhcp-vs-kea.sh")
	}
	server, err := netip.ParseAddrPort(listen)
	if err != nil {
		t.Fatal(err)
	}
	network, err := netip.ParsePrefix(os.Getenv("IRONFLOW_DHCP_BENCH_SUBNET"))
	if err != nil {
		t.Fatal(err)
	}
	first, last := network.Masked().Addr().As4(), network.Masked().Addr().As4()
	first[2], first[3] = 1, 0
	for i := network.Bits() / 8; i < 4; i++ {
		last[i] = 0xff
	}
	last[3] = 0xfe
	f := newFixture(t, Config{ServerIP: server.Addr(), Subnets: []Subnet{{ID: subnetID, CIDR: network,
		RangeStart: netip.AddrFrom4(first), RangeEnd: netip.AddrFrom4(last), LeaseTime: time.Hour}}})
	srv, err := NewServer(f.h, ServerConfig{RelayAddr: listen, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	fmt.Println("serving DHCP on", listen) // the script waits for this line
	if err := srv.Serve(ctx); err != nil {
		t.Fatal(err)
	}
}
