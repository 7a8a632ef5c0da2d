package rack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	mdns "github.com/miekg/dns"

	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/internal/dhcptest"
	"github.com/ironflow/ironflow/internal/netnstest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
)

// floodEnv, set to a duration, runs TestDHCPUnderDNSFlood for that long per phase.
const floodEnv = "IRONFLOW_DNS_FLOOD"

// rackChildEnv carries the rack of TestDHCPUnderDNSFlood to TestRackChildProcess.
const rackChildEnv = "IRONFLOW_TEST_RACK_CHILD"

// maxFloodQueries bounds the queries one flood phase sends, whatever its duration.
const maxFloodQueries = 2_000_000

// rackChild is the part of a vethRack a rack in another process needs.
type rackChild struct {
	Dir, NS, If string
	ServerIP    netip.Addr
}

// TestDHCPUnderDNSFlood measures (it asserts nothing about speed) the rack's DHCP exchanges
// while a client's namespace floods the rack's DNS with random names of the region's zone,
// TXT with EDNS 4096: without a flood, from an address outside every served subnet, and from
// a served client's address. The rack runs in a process of its own (TestRackChildProcess),
// so its resident memory is the rack's alone. Run it with IRONFLOW_DNS_FLOOD=5s.
func TestDHCPUnderDNSFlood(t *testing.T) {
	phase, err := time.ParseDuration(os.Getenv(floodEnv))
	if err != nil || phase <= 0 {
		t.Skipf("a measurement: set %s to the duration of each phase", floodEnv)
	}
	v := newVethRack(t)
	v.subnet(t, "10.77.0.0/24", "", api.IPRange{Start: "10.77.0.100", End: "10.77.0.200"})
	v.machine(t, "veth-machine", v.mac, "10.77.0.50")
	if _, err := v.admin.Domains().Create(context.Background(), api.Domain{Name: "a.example", Default: true, TTL: 300}); err != nil {
		t.Fatal(err)
	}
	// The outsider's network joins the same link but is no subnet of the region.
	netnstest.IP(t, "-n", v.rackNS, "addr", "add", "10.88.0.1/24", "dev", v.rackIf)
	netnstest.IP(t, "-n", v.cliNS, "addr", "add", "10.77.0.50/24", "dev", v.cliIf)
	netnstest.IP(t, "-n", v.cliNS, "addr", "add", "10.88.0.2/24", "dev", v.cliIf)
	pid := startRackChild(t, v)

	conn, mac := dhcptest.RawClientConn(t, v.cliNS, v.cliIf)
	c, err := nclient4.NewWithConn(conn, mac, nclient4.WithTimeout(time.Second), nclient4.WithRetry(1))
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	defer c.Close()
	testutil.Eventually(t, 20*time.Second, "the rack in its own process leases", func() bool {
		_, err := c.Request(context.Background())
		return err == nil
	})
	server := netip.AddrPortFrom(v.serverIP, 53)
	for _, p := range []struct {
		name string
		from netip.Addr // invalid: no flood
	}{
		{"no flood", netip.Addr{}},
		{"outsider flood", netip.MustParseAddr("10.88.0.2")},
		{"client flood", netip.MustParseAddr("10.77.0.50")},
	} {
		stop := time.Now().Add(phase)
		var fl *floodCount
		var wg sync.WaitGroup
		if p.from.IsValid() {
			fl = floodDNS(t, v.cliNS, p.from, server, stop, &wg)
		}
		var lat []time.Duration
		failed := 0
		for time.Now().Before(stop) {
			start := time.Now()
			if _, err := c.Request(context.Background()); err != nil {
				failed++
				continue
			}
			lat = append(lat, time.Since(start))
		}
		wg.Wait()
		line := fmt.Sprintf("%-15s DHCP: %s, %d of %d failed (%.1f %%)", p.name, latencies(lat), failed, failed+len(lat), 100*float64(failed)/float64(max(failed+len(lat), 1)))
		if fl != nil {
			line += fmt.Sprintf("; DNS: %d queries sent (%d B), %d answers (%d B)", fl.sent.Load(), fl.sentBytes.Load(), fl.answers.Load(), fl.answerBytes.Load())
		}
		t.Logf("%s; rack %s", line, procMemory(t, pid))
	}
}

// latencies summarises exchange times: mean, median, 99th percentile.
func latencies(d []time.Duration) string {
	if len(d) == 0 {
		return "no exchange"
	}
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	ms := func(x time.Duration) float64 { return float64(x) / float64(time.Millisecond) }
	return fmt.Sprintf("mean %.1f ms, median %.1f ms, p99 %.1f ms", ms(sum/time.Duration(len(d))), ms(d[len(d)/2]), ms(d[len(d)*99/100]))
}

// procMemory is pid's resident memory now and at its peak.
func procMemory(t *testing.T, pid int) string {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var rss, hwm string
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			hwm = strings.TrimSpace(v)
		}
	}
	return fmt.Sprintf("RSS %s (peak %s)", rss, hwm)
}

// floodCount counts one flood's queries and the answers that came back.
type floodCount struct{ sent, sentBytes, answers, answerBytes atomic.Int64 }

// floodDNS sends random names of a.example from src in namespace ns to server until stop,
// from two senders, and counts the answers; wg is done when it has stopped.
func floodDNS(t *testing.T, ns string, src netip.Addr, server netip.AddrPort, stop time.Time, wg *sync.WaitGroup) *floodCount {
	t.Helper()
	var conn *net.UDPConn
	netnstest.Run(t, ns, func() (err error) {
		conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)))
		return err
	})
	fl := &floodCount{}
	var next atomic.Int64
	wg.Add(3)
	for range 2 {
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				n := next.Add(1)
				if n > maxFloodQueries {
					return
				}
				q := new(mdns.Msg).SetQuestion(fmt.Sprintf("f%x.a.example.", n), mdns.TypeTXT)
				q.SetEdns0(4096, false)
				raw, err := q.Pack()
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := conn.WriteToUDPAddrPort(raw, server); err == nil {
					fl.sent.Add(1)
					fl.sentBytes.Add(int64(len(raw)))
				}
			}
		}()
	}
	go func() {
		defer wg.Done()
		defer conn.Close()
		buf := make([]byte, 65535)
		_ = conn.SetReadDeadline(stop.Add(2 * time.Second))
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			fl.answers.Add(1)
			fl.answerBytes.Add(int64(n))
		}
	}()
	return fl
}

// startRackChild runs v's rack in a process of its own (TestRackChildProcess) until the test
// ends, and returns its PID.
func startRackChild(t *testing.T, v *vethRack) int {
	t.Helper()
	spec, err := json.Marshal(rackChild{Dir: v.dir, NS: v.rackNS, If: v.rackIf, ServerIP: v.serverIP})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRackChildProcess$", "-test.count=1")
	// The child needs no database: a URL it never uses keeps it from starting PostgreSQL.
	cmd.Env = append(os.Environ(), rackChildEnv+"="+string(spec), pgtest.EnvURL+"=postgres://unused")
	var out testutil.SafeBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // the child stops its rack when its stdin ends
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("rack process: %v: %s", err, out.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("rack process did not stop: %s", out.String())
		}
	})
	return cmd.Process.Pid
}

// TestRackChildProcess is the rack of TestDHCPUnderDNSFlood, in its own process; it runs
// only when that test starts it, and stops when its stdin ends.
func TestRackChildProcess(t *testing.T) {
	spec := os.Getenv(rackChildEnv)
	if spec == "" {
		t.Skip("the rack process of TestDHCPUnderDNSFlood")
	}
	var c rackChild
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		t.Fatal(err)
	}
	v := &vethRack{dir: c.Dir, rackNS: c.NS, rackIf: c.If, serverIP: c.ServerIP}
	v.start(t)
	_, _ = io.Copy(io.Discard, os.Stdin)
}
