package rack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/internal/dhcptest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/region/server"
	"github.com/ironflow/ironflow/region/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	adminToken = "rack-test-admin-token"
	testSecret = "rack-test-secret"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testLogger is the rack's log: shown as it is written when IRONFLOW_TEST_LOG is set, else kept
// and shown when the test fails, so a failure says what the rack saw.
func testLogger(t testing.TB) *slog.Logger {
	debug := &slog.HandlerOptions{Level: slog.LevelDebug}
	if os.Getenv("IRONFLOW_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, debug))
	}
	kept := &keptLog{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rack log:\n%s", kept)
		}
	})
	return slog.New(slog.NewTextHandler(kept, debug))
}

// keptLogMax bounds a test's kept rack log: a flood test logs per dropped packet.
const keptLogMax = 1 << 20

// keptLog is the first keptLogMax bytes of the rack's log and the count of the rest.
type keptLog struct {
	mu      sync.Mutex
	b       bytes.Buffer
	dropped int
}

func (l *keptLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len()+len(p) > keptLogMax {
		l.dropped += len(p)
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *keptLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped > 0 {
		return fmt.Sprintf("%s… and %d bytes more", l.b.String(), l.dropped)
	}
	return l.b.String()
}

// region is one region process on 127.0.0.1 serving a database.
type region struct {
	URL  string
	stop func()
}

// startRegion runs a region process on dbURL with the rack secret until stopped or the
// test ends.
func startRegion(t *testing.T, dbURL, name string) *region {
	t.Helper()
	return startRegionWith(t, dbURL, name, nil)
}

// startRegionWith is startRegion with adjust applied to the server's config.
func startRegionWith(t *testing.T, dbURL, name string, adjust func(*server.Config)) *region {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.BootstrapAdmin(ctx, adminToken); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &region{URL: "http://" + ln.Addr().String()}
	cfg := server.Config{Name: name, PublicURL: r.URL, RackSecret: testSecret, Version: "test", Logger: quiet}
	if adjust != nil {
		adjust(&cfg)
	}
	srv := server.New(st, cfg)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("region %s: %v", name, err)
		}
		st.Close()
	}
	t.Cleanup(r.stop)
	return r
}

func (r *region) admin() *client.Client { return client.New(r.URL, adminToken) }

// testNet is a loopback /24 for this test process: the relay agent the test plays listens
// on its .1 (giaddr:67). It stays below 127.16/12, where rack/dhcp's tests play theirs.
func testNet() netip.Prefix {
	pid := os.Getpid()
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, byte(1 + pid%15), byte(pid / 15 % 256), 0}), 24)
}

func netAddr(last byte) netip.Addr {
	b := testNet().Addr().As4()
	b[3] = last
	return netip.AddrFrom4(b)
}

// network creates, on the region, a VLAN served by rack with one subnet of testNet and a
// machine with a reserved address; it returns the machine's MAC and address.
func network(t *testing.T, c *client.Client, rack string) (net.HardwareAddr, netip.Addr) {
	t.Helper()
	ctx := context.Background()
	fabric, err := c.Fabrics().Create(ctx, api.Fabric{Name: "fabric-1"})
	if err != nil {
		t.Fatal(err)
	}
	vlan, err := c.VLANs().Create(ctx, api.VLAN{Name: "vlan-1", Fabric: fabric.Uuid, VID: 1, DHCPOn: true, PrimaryRack: rack})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subnets().Create(ctx, api.Subnet{Name: "net-1", CIDR: testNet().String(), VLAN: vlan.Uuid, Gateway: netAddr(1).String(),
		DynamicRange: api.IPRange{Start: netAddr(100).String(), End: netAddr(200).String()}, LeaseSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}
	if _, err := c.Machines().Create(ctx, api.Machine{Name: "birdy", HardwareAddrs: []string{mac.String()},
		Address: netAddr(50).String(), BootEnv: "local"}); err != nil {
		t.Fatal(err)
	}
	return mac, netAddr(50)
}

// movingRack is a rack registered with region-a, its network on both regions and its record
// on region-b: what the transfer workflow has copied before it repoints the rack.
type movingRack struct {
	src, dst *region
	dir      string // the rack's state dir
	state    State
	mac      net.HardwareAddr // a machine with a reserved address on the rack's subnet
	reserved netip.Addr
}

// newMovingRack builds a movingRack; adjustDst adjusts region-b's server config.
func newMovingRack(t *testing.T, adjustDst func(*server.Config)) movingRack {
	t.Helper()
	ctx := context.Background()
	m := movingRack{
		src: startRegion(t, pgtest.NewDatabase(t), "region-a"),
		dst: startRegionWith(t, pgtest.NewDatabase(t), "region-b", adjustDst),
		dir: t.TempDir(),
	}
	var err error
	m.state, err = Register(ctx, RegisterOptions{URLs: []string{m.src.URL}, Secret: testSecret, Name: "rack-1", StateDir: m.dir})
	if err != nil {
		t.Fatal(err)
	}
	m.mac, m.reserved = network(t, m.src.admin(), m.state.Uuid)
	if _, err := m.dst.admin().Racks().Create(ctx, api.Rack{Uuid: m.state.Uuid, Name: "rack-1"}); err != nil {
		t.Fatal(err)
	}
	network(t, m.dst.admin(), m.state.Uuid)
	return m
}

// rackOptions serves DHCP relayed on 127.0.0.1 and HTTP boot, with fast heartbeats and
// region checks.
func rackOptions(t *testing.T, stateDir string) Options {
	t.Helper()
	return Options{
		StateDir:            stateDir,
		DHCPRelayListen:     testutil.FreeUDPAddr(t),
		HTTPListen:          testutil.FreeAddr(t),
		TFTPListen:          testutil.FreeUDPAddr(t),
		BootDir:             t.TempDir(),
		HeartbeatInterval:   200 * time.Millisecond,
		RegionCheckInterval: 200 * time.Millisecond,
		Version:             "test",
		Logger:              testLogger(t),
	}
}

// runningRack is a rack process started by startRack.
type runningRack struct {
	p    *process
	stop func()
}

// startRack opens and runs a rack until stopped or the test ends.
func startRack(t *testing.T, o Options) *runningRack {
	t.Helper()
	p, err := open(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		defer p.close()
		done <- p.run(ctx)
	}()
	stopped := false
	r := &runningRack{p: p, stop: func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("rack: %v", err)
		}
	}}
	t.Cleanup(r.stop)
	return r
}

// relayAgent plays a DHCP relay at testNet's .1 in front of the rack's relay socket.
type relayAgent struct{ *dhcptest.Relay }

func newRelayAgent(t *testing.T, rackRelay string) *relayAgent {
	t.Helper()
	return &relayAgent{dhcptest.NewRelay(t, netAddr(1), rackRelay)}
}

// dora returns the address the rack acknowledged for mac, or an invalid address when it did
// not answer or refused.
func (a *relayAgent) dora(t *testing.T, mac net.HardwareAddr) netip.Addr {
	t.Helper()
	got, err := a.DORA(mac)
	if err != nil {
		t.Logf("DHCP for %s: %v", mac, err)
		return netip.Addr{}
	}
	return got
}

// httpStatus GETs url and returns the status code (0 when unreachable).
func httpStatus(url string) int {
	code, _ := httpGet(url)
	return code
}

// httpGet GETs url and returns the status code (0 when unreachable) and the body.
func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// copyNetwork creates from's fabrics, VLANs, subnets and machines on to, keeping their UUIDs.
func copyNetwork(t *testing.T, from, to *client.Client) {
	t.Helper()
	ctx := context.Background()
	fabrics, err := from.Fabrics().List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fabrics {
		if _, err := to.Fabrics().Create(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	vlans, err := from.VLANs().List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vlans {
		if _, err := to.VLANs().Create(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	subnets, err := from.Subnets().List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sn := range subnets {
		if _, err := to.Subnets().Create(ctx, sn); err != nil {
			t.Fatal(err)
		}
	}
	machines, err := from.Machines().List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range machines {
		if _, err := to.Machines().Create(ctx, api.Machine{Uuid: m.Uuid, Name: m.Name, HardwareAddrs: m.HardwareAddrs, Address: m.Address, BootEnv: m.BootEnv}); err != nil {
			t.Fatal(err)
		}
	}
}
