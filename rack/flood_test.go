package rack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
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

// floodEnv, set to a duration, runs TestDHCPUnderFloods for that long per phase.
const floodEnv = "IRONFLOW_FLOOD"

// floodHeapEnv, set to a directory, has each rack process of TestDHCPUnderFloods write its
// heap profile there when it stops (named by time and PID, so in the order of the phases),
// for `go tool pprof -sample_index=inuse_space -top`.
const floodHeapEnv = "IRONFLOW_FLOOD_HEAPDIR"

// rackChildEnv carries the rack of TestDHCPUnderFloods to TestRackChildProcess, and
// flooderChildEnv a flood to TestFlooderChildProcess.
const (
	rackChildEnv    = "IRONFLOW_TEST_RACK_CHILD"
	flooderChildEnv = "IRONFLOW_TEST_FLOODER_CHILD"
)

// maxFloodSends bounds what one flood phase sends (queries, messages, connections, reports),
// whatever its duration.
const maxFloodSends = 2_000_000

// rackChild is the part of a vethRack a rack in another process needs.
type rackChild struct {
	Dir, NS, If, SyslogListen string
	ServerIP                  netip.Addr
}

// The addresses of the flood test's client namespace: the served machine's reservation, an
// outsider (a network on the link that is no subnet of the region), the outsiders holding
// syslog connections, the unknown machines enlisting (served subnet, no lease).
var (
	floodClient   = netip.MustParseAddr("10.77.0.50")
	floodOutsider = netip.MustParseAddr("10.88.0.2")
	syslogHolders = addrRange(netip.MustParseAddr("10.88.0.10"), 64)
	enlisters     = addrRange(netip.MustParseAddr("10.77.0.210"), 16)
)

// syslogConnsPerAddr are the TCP connections each of syslogHolders holds.
const syslogConnsPerAddr = 4

// addrRange is n addresses from first.
func addrRange(first netip.Addr, n int) []netip.Addr {
	r := []netip.Addr{first}
	for len(r) < n {
		r = append(r, r[len(r)-1].Next())
	}
	return r
}

// flood is one flood of TestDHCPUnderFloods, sent by TestFlooderChildProcess from the
// client's namespace until Stop.
type flood struct {
	Kind                 string // a key of floods
	Stop                 time.Time
	DNS, Syslog          netip.AddrPort // the rack's
	HTTPBoot, ResultPath string         // the rack's HTTP boot URL; where the flooder writes its floodResult
}

// floods are the kinds of flood, each the phase of TestDHCPUnderFloods of that name.
var floods = map[string]func(*flood, *floodTally) error{
	"DNS, outsider":    func(fl *flood, f *floodTally) error { return fl.dnsFlood(f, floodOutsider) },
	"DNS, client":      func(fl *flood, f *floodTally) error { return fl.dnsFlood(f, floodClient) },
	"syslog UDP":       func(fl *flood, f *floodTally) error { return fl.syslogUDPFlood(f, floodClient, floodOutsider) },
	"syslog TCP slots": (*flood).syslogTCPFlood,
	"enlistment":       (*flood).enlistFlood,
}

// TestDHCPUnderFloods measures (it asserts nothing about speed) the DHCP exchanges, resident
// memory and CPU time of a rack started afresh for each phase while a client's namespace floods what the rack serves on the
// provisioning network, one phase each: no flood; DNS queries of random names of the
// region's zone (TXT, EDNS 4096) from an outsider, then from a served client; syslog over UDP
// from a served client and an outsider; syslog over TCP, 4 connections held from each of 64
// outsider addresses and made again when the rack closes them; an enlistment storm of
// random MACs from 16 goroutines, each from an address of the served subnet. The rack
// (TestRackChildProcess) and each flood (TestFlooderChildProcess) run in processes of their
// own, so the rack's memory is its own and the flood's goroutines do not delay the test's
// DHCP client; the rack's peak memory is reset once it leases. Run it with
// IRONFLOW_FLOOD=5s.
func TestDHCPUnderFloods(t *testing.T) {
	phase, err := time.ParseDuration(os.Getenv(floodEnv))
	if err != nil || phase <= 0 {
		t.Skipf("a measurement: set %s to the duration of each phase", floodEnv)
	}
	v := newVethRack(t)
	v.syslogListen = v.serverIP.String() + ":514"
	v.subnet(t, "10.77.0.0/24", "", api.IPRange{Start: "10.77.0.100", End: "10.77.0.200"})
	v.machine(t, "veth-machine", v.mac, floodClient.String())
	if _, err := v.admin.Domains().Create(context.Background(), api.Domain{Name: "a.example", Default: true, TTL: 300}); err != nil {
		t.Fatal(err)
	}
	netnstest.IP(t, "-n", v.rackNS, "addr", "add", "10.88.0.1/24", "dev", v.rackIf)
	for _, a := range append([]netip.Addr{floodClient, floodOutsider}, append(syslogHolders, enlisters...)...) {
		netnstest.IP(t, "-n", v.cliNS, "addr", "add", a.String()+"/24", "dev", v.cliIf)
	}
	conn, mac := dhcptest.RawClientConn(t, v.cliNS, v.cliIf)
	c, err := nclient4.NewWithConn(conn, mac, nclient4.WithTimeout(time.Second), nclient4.WithRetry(1))
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	defer c.Close()
	t.Logf("load average %s", loadAverage(t))
	for _, kind := range []string{"no flood", "DNS, outsider", "DNS, client", "syslog UDP", "syslog TCP slots", "enlistment"} {
		// A rack process of its own for each phase: what one flood left in its memory is not
		// the next one's. It opens its HTTP boot, DNS and syslog sockets before it serves
		// DHCP: once it leases, every flood has its target.
		pid, stop := startRackChild(t, v)
		testutil.Eventually(t, 20*time.Second, "the rack in its own process leases", func() bool {
			_, err := c.Request(context.Background())
			return err == nil
		})
		resetPeakMemory(t, pid)
		before := sampleProc(t, pid)
		fl := &flood{Kind: kind, Stop: time.Now().Add(phase), DNS: netip.AddrPortFrom(v.serverIP, 53),
			Syslog: netip.MustParseAddrPort(v.syslogListen), HTTPBoot: "http://" + v.serverIP.String() + ":5248",
			ResultPath: filepath.Join(t.TempDir(), "flood.json")}
		var wait func() floodResult
		if _, ok := floods[kind]; ok {
			wait = startFlooder(t, v.cliNS, fl)
		}
		d := dhcpUntil(c, fl.Stop)
		line := fmt.Sprintf("%-16s DHCP: %s", kind, d)
		if wait != nil {
			line += "; flood: " + wait().String()
		}
		after := sampleProc(t, pid)
		stop()
		t.Logf("%s; rack: RSS %d→%d kB, peak %d kB, CPU %.1f s", line, before.rss, after.rss, after.peak, (after.cpu - before.cpu).Seconds())
	}
	t.Logf("load average %s", loadAverage(t))
}

// dhcpExchanges are the times of back-to-back DHCP exchanges and how many failed.
type dhcpExchanges struct {
	took   []time.Duration
	failed int
}

// dhcpUntil does DHCP exchanges one after the other until stop.
func dhcpUntil(c *nclient4.Client, stop time.Time) dhcpExchanges {
	var d dhcpExchanges
	for time.Now().Before(stop) {
		start := time.Now()
		if _, err := c.Request(context.Background()); err != nil {
			d.failed++
			continue
		}
		d.took = append(d.took, time.Since(start))
	}
	return d
}

// String summarises the exchanges: count, mean, median, 95th percentile, maximum, failures.
func (d dhcpExchanges) String() string {
	failed := fmt.Sprintf("%d failed", d.failed)
	if len(d.took) == 0 {
		return "no exchange done, " + failed
	}
	s := slices.Sorted(slices.Values(d.took))
	var sum time.Duration
	for _, x := range s {
		sum += x
	}
	ms := func(x time.Duration) float64 { return float64(x) / float64(time.Millisecond) }
	return fmt.Sprintf("%d done, mean %.1f ms, p50 %.1f ms, p95 %.1f ms, max %.1f ms, %s", len(s),
		ms(sum/time.Duration(len(s))), ms(s[len(s)/2]), ms(s[len(s)*95/100]), ms(s[len(s)-1]), failed)
}

// procSample is a process's resident memory now and at its peak, in kB, and the CPU time it
// has used.
type procSample struct {
	rss, peak int
	cpu       time.Duration
}

// clockTick is the unit of a process's CPU times in /proc (USER_HZ).
const clockTick = 10 * time.Millisecond

// sampleProc reads pid's resident memory (VmRSS, VmHWM) and CPU time (user and system).
func sampleProc(t *testing.T, pid int) procSample {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid)
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var s procSample
	for line := range strings.SplitSeq(string(status), "\n") {
		for prefix, to := range map[string]*int{"VmRSS:": &s.rss, "VmHWM:": &s.peak} {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				if *to, err = strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))); err != nil {
					t.Fatalf("%s %q: %v", prefix, v, err)
				}
			}
		}
	}
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// After the command's name in parentheses: state is field 3, utime and stime 14 and 15.
	_, after, _ := bytes.Cut(stat, []byte(") "))
	for _, f := range strings.Fields(string(after))[11:13] {
		ticks, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s/stat: %v", dir, err)
		}
		s.cpu += time.Duration(ticks) * clockTick
	}
	return s
}

// resetPeakMemory sets pid's VmHWM to its current resident memory.
func resetPeakMemory(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
}

// loadAverage is this machine's load average (1, 5 and 15 minutes).
func loadAverage(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(raw))[:3], " ")
}

// floodResult is what a flood sent and what came back, by kind of answer.
type floodResult struct {
	Sent, SentBytes int64
	Got             map[string]int
}

func (r floodResult) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.Got)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.Got[k]))
	}
	if len(parts) == 0 {
		parts = []string{"nothing came back"}
	}
	return fmt.Sprintf("%d sent (%d B); %s", r.Sent, r.SentBytes, strings.Join(parts, ", "))
}

// floodTally counts a flood as it runs; wg is done when its goroutines have stopped.
type floodTally struct {
	wg        sync.WaitGroup
	next      atomic.Int64 // sends claimed, at most maxFloodSends
	sentBytes atomic.Int64
	mu        sync.Mutex
	got       map[string]int
}

// claim takes one send of the phase's budget and returns its number, from 1; 0 when the
// budget is spent or the phase is over.
func (f *floodTally) claim(stop time.Time) int64 {
	if !time.Now().Before(stop) {
		return 0
	}
	if n := f.next.Add(1); n <= maxFloodSends {
		return n
	}
	return 0
}

func (f *floodTally) add(kind string) {
	f.mu.Lock()
	f.got[kind]++
	f.mu.Unlock()
}

func (f *floodTally) result() floodResult {
	return floodResult{Sent: min(f.next.Load(), maxFloodSends), SentBytes: f.sentBytes.Load(), Got: f.got}
}

// udpFlood sends payload(n) from src to dst from two goroutines until the phase's end and
// counts each datagram that comes back by kind(answer) (nil: none is expected).
func (fl *flood) udpFlood(f *floodTally, src netip.Addr, dst netip.AddrPort, payload func(n int64) []byte, kind func([]byte) string) error {
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)))
	if err != nil {
		return err
	}
	var senders sync.WaitGroup
	for range 2 {
		senders.Go(func() {
			for n := f.claim(fl.Stop); n > 0; n = f.claim(fl.Stop) {
				raw := payload(n)
				if _, err := conn.WriteToUDPAddrPort(raw, dst); err != nil {
					f.add("send errors")
					continue
				}
				f.sentBytes.Add(int64(len(raw)))
			}
		})
	}
	f.wg.Go(func() {
		defer conn.Close()
		buf := make([]byte, 65535)
		_ = conn.SetReadDeadline(fl.Stop.Add(2 * time.Second))
		for {
			n, err := conn.Read(buf)
			if err != nil {
				senders.Wait()
				return
			}
			if kind != nil {
				f.add(kind(buf[:n]))
			}
		}
	})
	return nil
}

// dnsFlood queries random names of a.example (TXT, EDNS 4096) from src and counts the answers
// by rcode.
func (fl *flood) dnsFlood(f *floodTally, src netip.Addr) error {
	return fl.udpFlood(f, src, fl.DNS, func(n int64) []byte {
		q := new(mdns.Msg).SetQuestion(fmt.Sprintf("f%x.a.example.", n), mdns.TypeTXT)
		q.SetEdns0(4096, false)
		raw, err := q.Pack()
		if err != nil {
			panic(err) // a question of a valid name always packs
		}
		return raw
	}, func(answer []byte) string {
		if len(answer) < 4 {
			return "short answers"
		}
		return "answers " + mdns.RcodeToString[int(answer[3]&0x0f)]
	})
}

// syslogLine is one RFC 3164 message of a flood.
func syslogLine(n int64) []byte {
	return fmt.Appendf(nil, "<13>Dec  1 15:00:01 flood kernel: message %d of a flood, padded to look like a real kernel line", n)
}

// syslogUDPFlood sends syslog over UDP from each of srcs (nothing comes back over UDP).
func (fl *flood) syslogUDPFlood(f *floodTally, srcs ...netip.Addr) error {
	for _, src := range srcs {
		if err := fl.udpFlood(f, src, fl.Syslog, syslogLine, nil); err != nil {
			return err
		}
	}
	return nil
}

// dialFrom connects to addr over TCP from src.
func dialFrom(ctx context.Context, src netip.Addr, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: time.Second, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
	return d.DialContext(ctx, "tcp", addr)
}

// syslogTCPFlood holds syslogConnsPerAddr connections from each of syslogHolders, sending a
// framed message every 100 ms, and connects again when the rack closes one. It counts the
// connections made, refused, closed by the rack and held to the phase's end.
func (fl *flood) syslogTCPFlood(f *floodTally) error {
	for _, src := range syslogHolders {
		for range syslogConnsPerAddr {
			f.wg.Go(func() {
				for f.claim(fl.Stop) > 0 {
					c, err := dialFrom(context.Background(), src, fl.Syslog.String())
					if err != nil {
						f.add("connections refused")
						continue
					}
					f.add("connections made")
					f.add(fl.holdSyslog(c, f))
				}
			})
		}
	}
	return nil
}

// holdSyslog sends on c until the phase ends or the rack closes it, and says which.
func (fl *flood) holdSyslog(c net.Conn, f *floodTally) string {
	defer c.Close()
	buf := make([]byte, 512)
	for n := int64(0); ; n++ {
		msg := syslogLine(n)
		framed := append(strconv.AppendInt(nil, int64(len(msg)), 10), ' ')
		if _, err := c.Write(append(framed, msg...)); err != nil {
			return "closed by the rack"
		}
		f.sentBytes.Add(int64(len(framed) + len(msg)))
		deadline := time.Now().Add(100 * time.Millisecond)
		if deadline.After(fl.Stop) {
			deadline = fl.Stop
		}
		_ = c.SetReadDeadline(deadline)
		if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
			return "closed by the rack" // the rack sends nothing: only its close ends a read
		}
		if !time.Now().Before(fl.Stop) {
			return "held to the end"
		}
	}
}

// enlistFlood posts discovery-environment reports of random MACs to the rack's
// POST /api/v1/enlist from a goroutine per address of enlisters, and counts the answers by
// HTTP status.
func (fl *flood) enlistFlood(f *floodTally) error {
	for _, src := range enlisters {
		c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dialFrom(ctx, src, addr) },
		}}
		f.wg.Go(func() {
			defer c.CloseIdleConnections()
			for f.claim(fl.Stop) > 0 {
				mac := make(net.HardwareAddr, 6)
				rand.Read(mac)
				mac[0] = 0x02 // locally administered, unicast
				body, _ := json.Marshal(api.Enlistment{Inventory: &api.Inventory{Interfaces: []api.NetInterface{{Name: "eth0", MAC: mac.String()}}}})
				f.sentBytes.Add(int64(len(body)))
				resp, err := c.Post(fl.HTTPBoot+api.PathPrefix+"/enlist", "application/json", bytes.NewReader(body))
				if err != nil {
					f.add("no answers")
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				f.add("answers " + strconv.Itoa(resp.StatusCode))
			}
		})
	}
	return nil
}

// startChild runs this test binary's test named run in a process of its own, through the
// command wrap (none: nil), with spec in JSON in its environment variable env (childSpec
// reads it). waitChild ends it.
func startChild(t *testing.T, wrap []string, run, env string, spec any) (*exec.Cmd, *testutil.SafeBuffer, io.Closer) {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	argv := append(wrap, os.Args[0], "-test.run=^"+run+"$", "-test.count=1")
	cmd := exec.Command(argv[0], argv[1:]...)
	// The child needs no database: a URL it never uses keeps it from starting PostgreSQL.
	cmd.Env = append(os.Environ(), pgtest.EnvURL+"=postgres://unused", env+"="+string(raw))
	out := &testutil.SafeBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out, stdin
}

// childSpec decodes into spec what the parent test passed in env, and skips the test when
// there is none: the test runs only as a child (startChild).
func childSpec(t *testing.T, env, what string, spec any) {
	t.Helper()
	raw := os.Getenv(env)
	if raw == "" {
		t.Skip(what)
	}
	if err := json.Unmarshal([]byte(raw), spec); err != nil {
		t.Fatal(err)
	}
}

// waitChild closes the child's stdin (a child that serves stops when it ends) and waits for
// it, at most 30 s.
func waitChild(t *testing.T, cmd *exec.Cmd, out *testutil.SafeBuffer, stdin io.Closer) {
	t.Helper()
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%v: %v: %s", cmd.Args, err, out.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("%v did not stop: %s", cmd.Args, out.String())
	}
}

// startRackChild runs v's rack in a process of its own (TestRackChildProcess) until stop or
// the test's end, and returns its PID.
func startRackChild(t *testing.T, v *vethRack) (pid int, stop func()) {
	t.Helper()
	cmd, out, stdin := startChild(t, nil, "TestRackChildProcess", rackChildEnv,
		rackChild{Dir: v.dir, NS: v.rackNS, If: v.rackIf, SyslogListen: v.syslogListen, ServerIP: v.serverIP})
	stop = sync.OnceFunc(func() { waitChild(t, cmd, out, stdin) })
	t.Cleanup(stop)
	return cmd.Process.Pid, stop
}

// TestRackChildProcess is the rack of TestDHCPUnderFloods, in its own process; it runs only
// when that test starts it, and stops when its stdin ends.
func TestRackChildProcess(t *testing.T) {
	var c rackChild
	childSpec(t, rackChildEnv, "the rack process of TestDHCPUnderFloods", &c)
	v := &vethRack{dir: c.Dir, rackNS: c.NS, rackIf: c.If, serverIP: c.ServerIP, syslogListen: c.SyslogListen}
	v.start(t)
	_, _ = io.Copy(io.Discard, os.Stdin)
	if dir := os.Getenv(floodHeapEnv); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%d-%d.heap", time.Now().UnixNano(), os.Getpid())))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// startFlooder sends fl from namespace ns in a process of its own (TestFlooderChildProcess,
// the whole process in ns), and returns the wait for its result.
func startFlooder(t *testing.T, ns string, fl *flood) func() floodResult {
	t.Helper()
	cmd, out, stdin := startChild(t, []string{"ip", "netns", "exec", ns}, "TestFlooderChildProcess", flooderChildEnv, fl)
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // ends a flooder that waitChild did not
	return func() floodResult {
		waitChild(t, cmd, out, stdin)
		var r floodResult
		raw, err := os.ReadFile(fl.ResultPath)
		if err == nil {
			err = json.Unmarshal(raw, &r)
		}
		if err != nil {
			t.Fatalf("flood %s: %v: %s", fl.Kind, err, out.String())
		}
		return r
	}
}

// TestFlooderChildProcess sends a flood of TestDHCPUnderFloods until its end and writes what
// it sent and got; it runs only when that test starts it.
func TestFlooderChildProcess(t *testing.T) {
	var fl flood
	childSpec(t, flooderChildEnv, "a flooding process of TestDHCPUnderFloods", &fl)
	f := &floodTally{got: map[string]int{}}
	if err := floods[fl.Kind](&fl, f); err != nil {
		t.Fatal(err)
	}
	f.wg.Wait()
	raw, err := json.Marshal(f.result())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fl.ResultPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}
