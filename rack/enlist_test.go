package rack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/enlist"
	"github.com/ironflow/ironflow/agent/inventory"
	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/rack/httpboot"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/server"
)

// iPXEReport is the enlistment URL iPXE fetches for the script's chain line, with the values
// its settings expand to (the SMBIOS strings as hexraw).
func iPXEReport(rackURL, mac, systemUUID string) string {
	q := url.Values{"mac": {strings.ReplaceAll(mac, ":", "-")}, "uuid": {systemUUID}, "serial": {hex.EncodeToString([]byte("SN 0042"))},
		"manufacturer": {hex.EncodeToString([]byte("QEMU"))}, "product": {hex.EncodeToString([]byte("Standard PC (Q35 + ICH9, 2009)"))},
		"buildarch": {"x86_64"}, "platform": {"pcbios"}}
	return rackURL + "/ipxe/enlist?" + q.Encode()
}

// startServingRacks registers n racks with region and serves their HTTP boot on loopback.
func startServingRacks(t *testing.T, reg *region, n int) []string {
	t.Helper()
	var urls []string
	for i := range n {
		dir := t.TempDir()
		if _, err := Register(context.Background(), RegisterOptions{URLs: []string{reg.URL}, Secret: testSecret,
			Name: "rack-" + string(rune('1'+i)), StateDir: dir}); err != nil {
			t.Fatal(err)
		}
		o := rackOptions(t, dir)
		startRack(t, o)
		u := "http://" + o.HTTPListen
		testutil.Eventually(t, 10*time.Second, "rack HTTP boot up", func() bool { return httpStatus(u+"/healthz") == http.StatusOK })
		urls = append(urls, u)
	}
	return urls
}

// An unknown machine's iPXE report reaching two racks at the same moment, several times,
// creates exactly one New machine with the reported facts.
func TestUnknownMachineEnlistsOnceThroughTwoRacks(t *testing.T) {
	ctx := context.Background()
	reg := startRegion(t, pgtest.NewDatabase(t), "region-a")
	racks := startServingRacks(t, reg, 2)
	const mac = "52:54:00:e0:00:01"
	const systemUUID = "8d2e6a3c-1b7f-4e0a-9c55-0a1b2c3d4e5f"

	// The unknown MAC's script chains to the report.
	code, script := httpGet(racks[0] + "/ipxe/mac/52-54-00-e0-00-01.ipxe")
	if code != http.StatusOK || !strings.Contains(script, "/ipxe/enlist?mac=${netX/mac:hexhyp}&uuid=${uuid}&serial=${serial:hexraw}") {
		t.Fatalf("script of the unknown MAC (%d):\n%s", code, script)
	}

	start := make(chan struct{})
	var wg sync.WaitGroup
	answers := make([]string, 8)
	codes := make([]int, 8)
	for i := range answers {
		wg.Go(func() {
			<-start
			codes[i], answers[i] = httpGet(iPXEReport(racks[i%2], mac, systemUUID))
		})
	}
	close(start)
	wg.Wait()
	created := 0
	for i, a := range answers {
		if codes[i] != http.StatusOK || !strings.Contains(a, "/boot/discovery/vmlinuz") || !strings.Contains(a, "ironflow.url="+racks[i%2]) {
			t.Fatalf("answer %d (%d):\n%s", i, codes[i], a)
		}
		if strings.Contains(a, "enlisted as new machine") {
			created++
		} else if !strings.Contains(a, "echo Ironflow: enlisted as machine new-525400e00001") {
			t.Fatalf("answer %d neither created nor matched the machine:\n%s", i, a)
		}
	}
	if created != 1 {
		t.Fatalf("%d answers say they created the machine, want 1", created)
	}
	ms, err := reg.admin().Machines().List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 {
		t.Fatalf("%d machines after the reports, want 1: %+v", len(ms), ms)
	}
	m := ms[0]
	b := m.Enlisted.Boot
	if m.Status != api.StatusNew || m.Stage != api.EnlistStage || m.BootEnv != api.EnlistStage || m.Arch != "amd64" ||
		m.Fingerprint.SystemUUID != systemUUID || len(m.HardwareAddrs) != 1 || m.HardwareAddrs[0] != mac ||
		b == nil || b.Serial != "SN 0042" || b.Manufacturer != "QEMU" || b.Product != "Standard PC (Q35 + ICH9, 2009)" || b.Platform != "pcbios" {
		t.Fatalf("enlisted machine: %+v, boot facts %+v", m, b)
	}
	// Rack is the rack the machine first booted through, Boot.Rack the one of its last report.
	rs, err := reg.admin().Racks().List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	served := func(id string) bool {
		return slices.ContainsFunc(rs, func(r api.Rack) bool { return r.Uuid == id })
	}
	if !served(m.Rack) || !served(b.Rack) {
		t.Errorf("the machine names racks %q and %q, not the racks it booted through", m.Rack, b.Rack)
	}
}

// A report whose MAC is one machine's and whose SMBIOS UUID is another's is refused: the
// machine still boots discovery, the script says why, the region records the refusal and
// changes neither machine.
func TestConflictingEnlistmentIsRefusedThroughTheRack(t *testing.T) {
	ctx := context.Background()
	reg := startRegion(t, pgtest.NewDatabase(t), "region-a")
	racks := startServingRacks(t, reg, 1)
	c := reg.admin()
	if _, err := c.Machines().Create(ctx, api.Machine{Name: "by-mac", HardwareAddrs: []string{"52:54:00:e0:00:02"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Machines().Create(ctx, api.Machine{Name: "by-uuid", Fingerprint: api.Fingerprint{SystemUUID: "8d2e6a3c-1b7f-4e0a-9c55-0a1b2c3d4e60"}}); err != nil {
		t.Fatal(err)
	}
	before, err := c.Machines().List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	code, script := httpGet(iPXEReport(racks[0], "52:54:00:e0:00:02", "8d2e6a3c-1b7f-4e0a-9c55-0a1b2c3d4e60"))
	if code != http.StatusOK || !strings.Contains(script, "echo Ironflow: enlistment not recorded:") || !strings.Contains(script, "belong to 2 machines") ||
		!strings.Contains(script, "/boot/discovery/vmlinuz") {
		t.Fatalf("answer to a conflicting report (%d):\n%s", code, script)
	}
	after, err := c.Machines().List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) || after[0].Enlisted != nil || after[1].Enlisted != nil {
		t.Fatalf("a refused report changed the machines: %+v", after)
	}
	evs, err := c.Events(ctx, url.Values{"Kind": {api.KindMachines}})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 || evs[0].Action != "enlist-refused" || !strings.HasPrefix(evs[0].Actor, "rack:") {
		t.Fatalf("latest machine event %+v, want enlist-refused by the rack", evs)
	}
}

// `ironflow agent enlist` in the discovery environment reports through the rack (no
// credential of its own): the region records this host's inventory and the commissioning
// results on the machine an operator declared by one non-PXE MAC only.
func TestAgentEnlistThroughTheRackMatchesADeclaredMAC(t *testing.T) {
	ctx := context.Background()
	reg := startRegion(t, pgtest.NewDatabase(t), "region-a")
	racks := startServingRacks(t, reg, 1)
	c := reg.admin()
	for _, s := range []api.CommissioningScript{
		{Name: "00-uname", Script: "uname -s"},
		{Name: "10-fails", Script: "echo broken >&2; exit 3"},
		{Name: "20-chatty", Script: "yes 0123456789 | head -c 20000; echo; echo last line"},
	} {
		if _, err := c.CommissioningScripts().Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	host, err := inventory.Gather(ctx, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(host.Interfaces) == 0 {
		t.Skip("this host has no network interface with a MAC")
	}
	declaredMAC := host.Interfaces[0].MAC // a device-backed NIC when there is one: it stays
	declared, err := c.Machines().Create(ctx, api.Machine{Name: "declared", HardwareAddrs: []string{declaredMAC}})
	if err != nil {
		t.Fatal(err)
	}

	res, err := enlist.Run(ctx, enlist.Options{URL: racks[0], Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Created || res.Machine != declared.Uuid || res.Status != api.StatusReady {
		t.Fatalf("enlistment %+v, want the declared machine %s, Ready", res, declared.Uuid)
	}
	m, err := c.Machines().Get(ctx, declared.Uuid)
	if err != nil {
		t.Fatal(err)
	}
	inv := m.Enlisted.Inventory
	hostname, _ := os.Hostname()
	if inv == nil || inv.Hostname != hostname || inv.MemoryMiB <= 0 || inv.CPU.Count <= 0 || inv.Arch != runtime.GOARCH {
		t.Fatalf("recorded inventory %+v", inv)
	}
	// The report gives the machine no MAC: those it reports besides the declared one wait
	// for an operator.
	if !slices.Equal(m.HardwareAddrs, []string{declaredMAC}) {
		t.Errorf("the machine's MACs %v, want the declared %s only", m.HardwareAddrs, declaredMAC)
	}
	for _, ifc := range inv.Interfaces {
		if ifc.MAC != declaredMAC && !slices.ContainsFunc(m.Enlisted.Pending, func(p api.PendingIdentity) bool { return p.Kind == api.IdentityMAC && p.Value == ifc.MAC }) {
			t.Errorf("the machine's pending identities %+v lack the reported %s (%s)", m.Enlisted.Pending, ifc.MAC, ifc.Name)
		}
	}
	if len(m.Enlisted.Commissioning) != 3 {
		t.Fatalf("commissioning results %+v", m.Enlisted.Commissioning)
	}
	uname, fails, chatty := m.Enlisted.Commissioning[0], m.Enlisted.Commissioning[1], m.Enlisted.Commissioning[2]
	if uname.ExitCode != 0 || strings.TrimSpace(uname.Output) != "Linux" || fails.ExitCode != 3 || fails.Output != "broken\n" {
		t.Errorf("results: %+v, %+v", uname, fails)
	}
	if !chatty.Truncated || len(chatty.Output) > api.MaxCommissionOutput || !strings.HasSuffix(chatty.Output, "last line\n") {
		t.Errorf("chatty script: truncated %v, %d bytes, ends %q", chatty.Truncated, len(chatty.Output), chatty.Output[max(0, len(chatty.Output)-20):])
	}
	evs, err := c.Events(ctx, url.Values{"Key": {declared.Uuid}})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 || evs[0].Action != "enlist" || !strings.HasPrefix(evs[0].Actor, "rack:") {
		t.Fatalf("latest event of the machine %+v, want enlist by the rack", evs)
	}
}

// stormTarget is where enlistmentStorm posts: a rack's or a region's POST /api/v1/enlist,
// with a token for a region.
type stormTarget struct{ url, token string }

// enlistmentStorm posts discovery-environment reports of random MACs from threads goroutines
// for d, from one loopback source address or (manySources) one per goroutine, and returns
// how many answers each HTTP status got.
func enlistmentStorm(t *testing.T, to stormTarget, threads int, d time.Duration, manySources bool) map[int]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range threads {
		src := "127.0.0.1"
		if manySources {
			src = fmt.Sprintf("127.0.9.%d", 10+i)
		}
		dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
		wg.Go(func() {
			defer c.CloseIdleConnections()
			for time.Now().Before(deadline) {
				mac := make(net.HardwareAddr, 6)
				rand.Read(mac)
				mac[0] = 0x02 // locally administered, unicast
				body, _ := json.Marshal(api.Enlistment{Inventory: &api.Inventory{Interfaces: []api.NetInterface{{Name: "eth0", MAC: mac.String()}}}})
				req, _ := http.NewRequest(http.MethodPost, to.url+api.PathPrefix+"/enlist", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if to.token != "" {
					req.Header.Set("Authorization", "Bearer "+to.token)
				}
				code := 0
				if resp, err := c.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return codes
}

// A 16-thread storm of reports of random MACs for 5 s creates no more machines than the
// rack's limit lets through, from one source address or from 16, nor than the region's
// per-caller limit when sent to the region directly; the rest is answered 503.
func TestEnlistmentStormIsBounded(t *testing.T) {
	ctx := context.Background()
	reg := startRegion(t, pgtest.NewDatabase(t), "region-a")
	racks := startServingRacks(t, reg, 2)
	const threads, storm = 16, 5 * time.Second
	created := 0
	for _, s := range []struct {
		name        string
		to          stormTarget
		manySources bool
		rate        float64 // of the limit that binds
		burst       int
	}{
		{"through a rack from one address", stormTarget{url: racks[0]}, false,
			float64(httpboot.DefaultEnlistLimits.PerClient), httpboot.DefaultEnlistLimits.PerClientBurst},
		{"through a rack from 16 addresses", stormTarget{url: racks[1]}, true,
			float64(httpboot.DefaultEnlistLimits.PerRack), httpboot.DefaultEnlistLimits.PerRackBurst},
		{"to the region directly", stormTarget{url: reg.URL, token: adminToken}, false,
			float64(server.DefaultEnlistLimits.PerRack), server.DefaultEnlistLimits.PerRackBurst},
	} {
		start := time.Now()
		codes := enlistmentStorm(t, s.to, threads, storm, s.manySources)
		elapsed := time.Since(start)
		ms, err := reg.admin().Machines().List(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := len(ms) - created
		created = len(ms)
		t.Logf("%s: %d machines created in %v; answers by status %v", s.name, n, elapsed.Round(time.Millisecond), codes)
		if bound := s.burst + int(s.rate*elapsed.Seconds()) + 1; n > bound || codes[http.StatusServiceUnavailable] == 0 {
			t.Errorf("%s: %d machines created, %d answers 503; want at most %d (the limit's burst and rate), the rest 503",
				s.name, n, codes[http.StatusServiceUnavailable], bound)
		}
	}
}

// An operator declared bmcbox by its BMC address with a reserved address and no MAC. A
// report to the rack (no credential) that claims the BMC address with a MAC of its own gets
// that MAC no reservation: DHCP gives it a dynamic address, the MAC waits on the machine for
// the operator, and the reservation goes to the MAC the operator accepts.
func TestEnlistmentByBMCGetsARogueMACNoReservation(t *testing.T) {
	ctx := context.Background()
	reg := startRegion(t, pgtest.NewDatabase(t), "region-a")
	dir := t.TempDir()
	st, err := Register(ctx, RegisterOptions{URLs: []string{reg.URL}, Secret: testSecret, Name: "rack-1", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	admin := reg.admin()
	birdy, birdyAddr := network(t, admin, st.Uuid)
	box, err := admin.Machines().Create(ctx, api.Machine{Name: "bmcbox", BMCAddress: "10.0.9.9", Address: netAddr(70).String(), BootEnv: "local"})
	if err != nil {
		t.Fatal(err)
	}
	o := rackOptions(t, dir)
	startRack(t, o)
	agent := newRelayAgent(t, o.DHCPRelayListen)
	testutil.Eventually(t, 10*time.Second, "the rack's config", func() bool { return agent.dora(t, birdy) == birdyAddr })

	rogue := net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x66, 0x66}
	report := fmt.Sprintf(`{"Inventory": {"Hostname": "rogue", "BMCAddress": "10.0.9.9", "Interfaces": [{"Name": "eth0", "MAC": %q}]}}`, rogue)
	resp, err := http.Post("http://"+o.HTTPListen+"/api/v1/enlist", "application/json", strings.NewReader(report))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the report: %s", resp.Status)
	}
	// A write after the report that the rack's DHCP shows: once it does, the rack serves
	// what the report left.
	moved := netAddr(51)
	if _, err := admin.Machines().Patch(ctx, "Name:birdy", json.RawMessage(`{"Address": "`+moved.String()+`"}`)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the config after the report", func() bool { return agent.dora(t, birdy) == moved })
	if got := agent.dora(t, rogue); got == netAddr(70) {
		t.Fatalf("the report's MAC got bmcbox's reserved address %s", got)
	}
	m, err := admin.Machines().Get(ctx, box.Uuid)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.HardwareAddrs) != 0 || m.Enlisted == nil || len(m.Enlisted.Pending) != 1 || m.Enlisted.Pending[0].Value != rogue.String() {
		t.Fatalf("bmcbox after the report: MACs %v, enlisted %+v; want none, the report's MAC pending", m.HardwareAddrs, m.Enlisted)
	}

	real := net.HardwareAddr{0x52, 0x54, 0x00, 0x09, 0x09, 0x01}
	if _, err := admin.Machines().Patch(ctx, box.Uuid, json.RawMessage(`{"HardwareAddrs": ["`+real.String()+`"]}`)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "bmcbox's reservation on the accepted MAC", func() bool { return agent.dora(t, real) == netAddr(70) })
}
