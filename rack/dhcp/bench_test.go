package dhcp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"github.com/ironflow/ironflow/internal/testutil"
)

// benchClients is the number of concurrent clients of the benchmarks: a PXE storm is many
// clients at once, and a group commit can only cover the requests in flight, so at a few
// milliseconds per fdatasync throughput needs hundreds of them.
const benchClients = 256

// benchPacket builds a request cheaply (dhcpv4.New draws a random xid through a timer).
func benchPacket(t dhcpv4.MessageType, mac net.HardwareAddr, giaddr netip.Addr, opts ...dhcpv4.Option) *dhcpv4.DHCPv4 {
	d := &dhcpv4.DHCPv4{OpCode: dhcpv4.OpcodeBootRequest, HWType: 1, ClientHWAddr: mac, GatewayIPAddr: giaddr.AsSlice(),
		HopCount: 1, Options: dhcpv4.OptionsFromList(append(opts, dhcpv4.OptMessageType(t))...)}
	copy(d.TransactionID[:], mac[2:])
	return d
}

func requestFor(offer *dhcpv4.DHCPv4, giaddr netip.Addr) *dhcpv4.DHCPv4 {
	return benchPacket(dhcpv4.MessageTypeRequest, offer.ClientHWAddr, giaddr,
		dhcpv4.OptRequestedIPAddress(offer.YourIPAddr), dhcpv4.OptServerIdentifier(offer.ServerIdentifier()))
}

// relayAgent is one simulated relay with one client behind it at a time.
type relayAgent struct {
	conn        *net.UDPConn
	giaddr      netip.Addr
	server      *net.UDPAddr
	buf         []byte
	retransmits *atomic.Int64
}

// roundTrip sends req and waits for the reply of the wanted type, retransmitting like a
// client would if a datagram is lost.
func (r *relayAgent) roundTrip(req *dhcpv4.DHCPv4, want dhcpv4.MessageType) (*dhcpv4.DHCPv4, error) {
	raw := req.ToBytes()
	for attempt := 0; ; attempt++ {
		if _, err := r.conn.WriteTo(raw, r.server); err != nil {
			return nil, err
		}
		r.conn.SetReadDeadline(time.Now().Add(time.Second))
		for {
			n, _, err := r.conn.ReadFrom(r.buf)
			if errors.Is(err, os.ErrDeadlineExceeded) && attempt < 4 {
				r.retransmits.Add(1)
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", req.MessageType(), err)
			}
			resp, err := dhcpv4.FromBytes(r.buf[:n])
			if err == nil && resp.TransactionID == req.TransactionID && resp.MessageType() == want {
				return resp, nil
			}
		}
	}
}

// dora runs one DISCOVER/OFFER/REQUEST/ACK for mac.
func (r *relayAgent) dora(mac net.HardwareAddr) error {
	offer, err := r.roundTrip(benchPacket(dhcpv4.MessageTypeDiscover, mac, r.giaddr), dhcpv4.MessageTypeOffer)
	if err != nil {
		return err
	}
	_, err = r.roundTrip(requestFor(offer, r.giaddr), dhcpv4.MessageTypeAck)
	return err
}

// runClients performs n DORAs with distinct MACs against server from benchClients relay
// agents listening on network net (first /24s) and returns the retransmission count.
func runClients(server *net.UDPAddr, network netip.Prefix, n int) (int64, error) {
	var next atomic.Int64
	var retransmits atomic.Int64
	var wg sync.WaitGroup
	agents := make([]*relayAgent, benchClients)
	for k := range agents {
		base := network.Addr().As4()
		base[2], base[3] = byte((k+2)>>8), byte(k+2) // .0.1 is the gateway
		giaddr := netip.AddrFrom4(base)
		conn, err := server4.NewIPv4UDPConn("", &net.UDPAddr{IP: giaddr.AsSlice(), Port: dhcpv4.ServerPort})
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		agents[k] = &relayAgent{conn: conn, giaddr: giaddr, server: server, buf: make([]byte, 1500), retransmits: &retransmits}
	}
	errs := make(chan error, len(agents))
	for _, r := range agents {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				mac := net.HardwareAddr{0x02, 0, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
				if err := r.dora(mac); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return retransmits.Load(), <-errs
}

// BenchmarkDORA runs full DISCOVER/OFFER/REQUEST/ACK exchanges over UDP on loopback, as
// relayed requests from benchClients relay agents, against the server with its lease
// table on disk: every ACK waits for its lease to be fsynced (group commit).
//
//   - in-process: the clients run in the benchmark process, so with -cpu 1 they share the
//     server's single P;
//   - client-process: the clients run in a child process (the test binary again), as real
//     clients would be other machines; the server process alone is limited by -cpu.
func BenchmarkDORA(b *testing.B) {
	b.Run("in-process", func(b *testing.B) {
		f := newFixture(b, loopConfig())
		server := startRelayServer(b, f)
		cpu := testutil.CPUTime(b)
		b.ResetTimer()
		retransmits, err := runClients(server, loopNet(), b.N)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		reportDORA(b, testutil.CPUTime(b)-cpu)
		b.ReportMetric(float64(retransmits), "retransmits")
	})
	b.Run("client-process", func(b *testing.B) {
		f := newFixture(b, loopConfig())
		server := startRelayServer(b, f)
		cmd := exec.Command(os.Args[0], "-test.run=^TestDORAClientProcess$")
		cmd.Env = append(os.Environ(), "IRONFLOW_DHCP_BENCH_SERVER="+server.String(),
			"IRONFLOW_DHCP_BENCH_NET="+loopNet().String(), "IRONFLOW_DHCP_BENCH_N="+strconv.Itoa(b.N), "GOMAXPROCS=")
		cpu := testutil.CPUTime(b)
		b.ResetTimer()
		out, err := cmd.CombinedOutput()
		b.StopTimer()
		if err != nil {
			b.Fatalf("client process: %v\n%s", err, out)
		}
		reportDORA(b, testutil.CPUTime(b)-cpu)
	})
}

// reportDORA reports the rate, and the CPU time the benchmark process spent per DORA: on
// a shared machine the rate depends on what else runs, the CPU cost much less.
func reportDORA(b *testing.B, cpu time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "DORA/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/DORA")
}

// TestDORAClientProcess is the client side of BenchmarkDORA/client-process; it only runs
// when that benchmark starts it.
func TestDORAClientProcess(t *testing.T) {
	server := os.Getenv("IRONFLOW_DHCP_BENCH_SERVER")
	if server == "" {
		t.Skip("client process of BenchmarkDORA")
	}
	addr, err := net.ResolveUDPAddr("udp4", server)
	if err != nil {
		t.Fatal(err)
	}
	network, err := netip.ParsePrefix(os.Getenv("IRONFLOW_DHCP_BENCH_NET"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(os.Getenv("IRONFLOW_DHCP_BENCH_N"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runClients(addr, network, n); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkHandleDORA is the handler alone (no sockets): DISCOVER then REQUEST from
// concurrent clients, with durable leases.
func BenchmarkHandleDORA(b *testing.B) {
	cfg := loopConfig()
	f := newFixture(b, cfg)
	giaddr := loopAddr(0, 1)
	var macs atomic.Uint64
	b.SetParallelism(benchClients)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mac := benchMAC(&macs)
			offer, err := f.h.Handle(benchPacket(dhcpv4.MessageTypeDiscover, mac, giaddr), cfg.ServerIP)
			if err != nil {
				b.Error(err)
				return
			}
			if ack, err := f.h.Handle(requestFor(offer, giaddr), cfg.ServerIP); err != nil || ack.MessageType() != dhcpv4.MessageTypeAck {
				b.Errorf("REQUEST: %v %v", ack, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "DORA/s")
}

// BenchmarkHandleDiscover is the handler's CPU cost for one DISCOVER (no disk I/O).
func BenchmarkHandleDiscover(b *testing.B) {
	cfg := loopConfig()
	f := newFixture(b, cfg)
	giaddr := loopAddr(0, 1)
	var macs atomic.Uint64
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.h.Handle(benchPacket(dhcpv4.MessageTypeDiscover, benchMAC(&macs), giaddr), cfg.ServerIP); err != nil {
			b.Fatal(err)
		}
	}
}

// benchMAC returns a distinct MAC per call, so every DORA creates a new lease.
func benchMAC(n *atomic.Uint64) net.HardwareAddr {
	v := n.Add(1)
	return net.HardwareAddr{0x02, byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}
