package rack

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

func TestRegisterStoresTheRegistration(t *testing.T) {
	t.Parallel()
	r := startRegion(t, pgtest.NewDatabase(t), "region-a")
	dead := "http://127.0.0.1:1" // nothing listens: Register moves on to the next URL
	dir := t.TempDir()
	ctx := context.Background()

	_, err := Register(ctx, RegisterOptions{URLs: []string{r.URL}, Secret: "wrong", Name: "rack-1", StateDir: dir})
	var refused *client.APIError
	if !errors.As(err, &refused) || refused.StatusCode != http.StatusUnauthorized || !refused.Permanent() {
		t.Fatalf("wrong secret: %v, want a 401 *client.APIError", err)
	}
	if _, err := LoadState(dir); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("a refused registration left state: %v", err)
	}
	for _, bad := range [][]string{nil, {"ftp://x"}, {"127.0.0.1:5240"}} {
		if _, err := Register(ctx, RegisterOptions{URLs: bad, Secret: testSecret, StateDir: dir}); err == nil {
			t.Errorf("URLs %q accepted", bad)
		}
	}

	st, err := Register(ctx, RegisterOptions{URLs: []string{dead, r.URL + "/"}, Secret: testSecret, Name: "rack-1", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if st.Uuid == "" || st.Token == "" || st.Name != "rack-1" || st.Region.Name != "region-a" ||
		!reflect.DeepEqual(st.Endpoints, []string{dead, r.URL}) {
		t.Fatalf("registered %+v", st)
	}
	if loaded, err := LoadState(dir); err != nil || !reflect.DeepEqual(loaded, st) {
		t.Fatalf("stored %+v, %v; want %+v", loaded, err, st)
	}
	// Registering again keeps the UUID and the name.
	again, err := Register(ctx, RegisterOptions{URLs: []string{r.URL}, Secret: testSecret, StateDir: dir})
	if err != nil || again.Uuid != st.Uuid || again.Name != "rack-1" || again.Token == st.Token {
		t.Fatalf("registered again: %+v, %v (first %+v)", again, err, st)
	}
}

// TestRackServesThroughFailoverAndOutage runs a rack against two processes of one region:
// the config arrives and a reserved machine gets its address over real DHCP, leases reach
// the region, heartbeats make the rack online; one region process dies and the rack fails
// over; every region dies and DHCP still answers, also after a restart of the rack.
func TestRackServesThroughFailoverAndOutage(t *testing.T) {
	db := pgtest.NewDatabase(t)
	a := startRegion(t, db, "region-a")
	b := startRegion(t, db, "region-a")
	ctx := context.Background()
	dir := t.TempDir()
	st, err := Register(ctx, RegisterOptions{URLs: []string{a.URL, b.URL}, Secret: testSecret, Name: "rack-1", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	admin := a.admin()
	mac, reserved := network(t, admin, st.Uuid)
	o := rackOptions(t, dir)
	rk := startRack(t, o)
	agent := newRelayAgent(t, o.DHCPRelayListen)

	testutil.Eventually(t, 10*time.Second, "the reserved address over DHCP", func() bool { return agent.dora(t, mac) == reserved })
	newcomer := net.HardwareAddr{0x52, 0x54, 0x00, 0xab, 0xcd, 0xef}
	dynamic := agent.dora(t, newcomer)
	if !dynamic.IsValid() || dynamic.Less(netAddr(100)) || netAddr(200).Less(dynamic) {
		t.Fatalf("unknown machine got %s, want an address of the dynamic range", dynamic)
	}

	testutil.Eventually(t, 10*time.Second, "leases synced to the region", func() bool {
		ls, err := admin.Leases().List(ctx, url.Values{"Rack": {st.Uuid}, "State": {"active"}})
		return err == nil && len(ls) == 2
	})
	testutil.Eventually(t, 10*time.Second, "the rack online through region A", func() bool {
		r, err := admin.Racks().Get(ctx, st.Uuid)
		return err == nil && r.Status == api.RackOnline && r.Meta["current-region"] == a.URL
	})
	if s := rk.p.ctrl.State(); !s.Serving.DHCP || !s.Serving.HTTP || !s.Serving.TFTP || s.ActiveLeases != 2 {
		t.Errorf("state %+v", s)
	}
	rackURL := "http://" + o.HTTPListen
	checkBootScripts(t, rackURL, mac, newcomer)
	code, metrics := httpGet(rackURL + "/metrics")
	for _, m := range []string{"ironflow_dhcp_leases_granted_total 2", "ironflow_tftp_bytes_sent_total", "ironflow_rack_current_region"} {
		if code != http.StatusOK || !strings.Contains(metrics, m) {
			t.Errorf("rack /metrics (%d) has no %q", code, m)
		}
	}

	// One region process dies: the proxy and the heartbeats move to the other.
	a.stop()
	testutil.Eventually(t, 10*time.Second, "the agent proxy answered by region B", func() bool {
		code := httpStatus(rackURL + "/api/v1/agent/" + api.NilUUID + "/next-job")
		return code != 0 && code != http.StatusBadGateway
	})
	testutil.Eventually(t, 10*time.Second, "heartbeats through region B", func() bool {
		r, err := b.admin().Racks().Get(ctx, st.Uuid)
		return err == nil && r.Status == api.RackOnline && r.Meta["current-region"] == b.URL
	})

	// Every region is down: DHCP goes on.
	b.stop()
	if got := agent.dora(t, mac); got != reserved {
		t.Fatalf("with every region down the reserved machine got %s, want %s", got, reserved)
	}
	if code := httpStatus(rackURL + "/api/v1/agent/" + api.NilUUID + "/next-job"); code != http.StatusBadGateway {
		t.Errorf("proxy with no region: %d, want 502", code)
	}

	// A restart with every region down serves the cached config and the logged leases.
	rk.stop()
	startRack(t, o)
	testutil.Eventually(t, 10*time.Second, "DHCP after a restart with no region", func() bool { return agent.dora(t, mac) == reserved })
	if got := agent.dora(t, newcomer); got != dynamic {
		t.Fatalf("after the restart the newcomer got %s, want its lease %s", got, dynamic)
	}
	checkBootScripts(t, rackURL, mac, newcomer)
}

// checkBootScripts checks the iPXE scripts the rack serves: the reserved machine boots its
// boot env from the region's config (local disk), an unknown machine boots discovery.
func checkBootScripts(t *testing.T, rackURL string, known, unknown net.HardwareAddr) {
	t.Helper()
	script := func(mac net.HardwareAddr) string {
		code, body := httpGet(rackURL + "/ipxe/mac/" + strings.ReplaceAll(mac.String(), ":", "-") + ".ipxe")
		if code != http.StatusOK {
			t.Fatalf("script of %s: %d %s", mac, code, body)
		}
		return body
	}
	if s := script(known); !strings.Contains(s, "boot env local") || !strings.Contains(s, "exit") {
		t.Errorf("script of the reserved machine:\n%s", s)
	}
	if s := script(unknown); !strings.Contains(s, "discovery/vmlinuz") {
		t.Errorf("script of an unknown machine:\n%s", s)
	}
}

// TestRackMovesToAnotherRegion moves a serving rack to another region with the rack-local
// activities while a client renews its lease all along.
func TestRackMovesToAnotherRegion(t *testing.T) {
	m := newMovingRack(t, nil)
	dst, dir, st, mac, reserved := m.dst, m.dir, m.state, m.mac, m.reserved
	ctx := context.Background()

	o := rackOptions(t, dir)
	rk := startRack(t, o)
	agent := newRelayAgent(t, o.DHCPRelayListen)
	testutil.Eventually(t, 10*time.Second, "the reserved address over DHCP", func() bool { return agent.dora(t, mac) == reserved })
	acts := rackacts.New(rk.p.ctrl, map[string]string{"region-b": testSecret, "wrong": "not-the-secret"}, rackacts.Pods{})

	refusals := []struct {
		name, errType string
		in            rackacts.SwapRegionEndpointsInput
	}{
		{"no URL", rackacts.ErrTypeInvalidInput, rackacts.SwapRegionEndpointsInput{Secret: "region-b"}},
		{"not a URL", rackacts.ErrTypeInvalidInput, rackacts.SwapRegionEndpointsInput{URLs: []string{"region-b:5240"}, Secret: "region-b"}},
		{"unknown secret name", rackacts.ErrTypeUnknownSecret, rackacts.SwapRegionEndpointsInput{URLs: []string{dst.URL}, Secret: "nope"}},
		{"secret the region refuses", rackacts.ErrTypeRegistrationRefused, rackacts.SwapRegionEndpointsInput{URLs: []string{dst.URL}, Secret: "wrong"}},
	}
	for _, r := range refusals {
		_, err := acts.SwapRegionEndpoints(ctx, r.in)
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || !appErr.NonRetryable() || appErr.Type() != r.errType {
			t.Errorf("%s: %v, want a non-retryable %s", r.name, err, r.errType)
		}
	}
	if got, _ := LoadState(dir); !reflect.DeepEqual(got, st) {
		t.Fatalf("refused moves changed the state: %+v", got)
	}

	// A client renews every few milliseconds while the rack moves.
	var renewals, failures atomic.Int64
	stopRenewing := make(chan struct{})
	renewing := make(chan struct{})
	go func() {
		defer close(renewing)
		for {
			select {
			case <-stopRenewing:
				return
			default:
			}
			if agent.dora(t, mac) == reserved {
				renewals.Add(1)
			} else {
				failures.Add(1)
			}
		}
	}()
	before := renewals.Load()

	res, err := acts.SwapRegionEndpoints(ctx, rackacts.SwapRegionEndpointsInput{URLs: []string{dst.URL}, Secret: "region-b"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Region != "region-b" || res.Endpoints[0] != dst.URL {
		t.Errorf("moved to %+v", res)
	}
	exported, err := acts.ExportLeases(ctx)
	if err != nil || exported.Exported != 1 {
		t.Fatalf("exported %+v, %v; want the one lease", exported, err)
	}
	testutil.Eventually(t, 10*time.Second, "the rack online at region B", func() bool {
		r, err := dst.admin().Racks().Get(ctx, st.Uuid)
		return err == nil && r.Status == api.RackOnline && r.Meta["current-region"] == dst.URL
	})
	testutil.Eventually(t, 10*time.Second, "renewals after the move", func() bool { return renewals.Load() > before+3 })
	close(stopRenewing)
	<-renewing
	if failures.Load() != 0 {
		t.Fatalf("%d of %d renewals failed during the move", failures.Load(), failures.Load()+renewals.Load())
	}
	t.Logf("%d DHCP exchanges answered while the rack moved, none failed", renewals.Load())

	ls, err := dst.admin().Leases().List(ctx, url.Values{"Rack": {st.Uuid}})
	if err != nil || len(ls) != 1 || ls[0].Addr != reserved.String() {
		t.Fatalf("leases at region B: %+v, %v", ls, err)
	}
	moved, err := LoadState(dir)
	if err != nil || moved.Uuid != st.Uuid || moved.Token == st.Token || !reflect.DeepEqual(moved.Endpoints, []string{dst.URL}) {
		t.Fatalf("stored state after the move %+v, %v", moved, err)
	}
	state, err := acts.ReportState(ctx)
	if err != nil || state.Region != "region-b" || state.CurrentRegion != dst.URL || state.ActiveLeases != 1 || !state.Serving.DHCP {
		t.Fatalf("reported %+v, %v", state, err)
	}
	// Payloads carry no secret and no token.
	payload, _ := json.Marshal([]any{state, res, exported})
	for _, s := range []string{testSecret, moved.Token, st.Token} {
		if strings.Contains(string(payload), s) {
			t.Fatalf("activity payloads %s leak %q", payload, s)
		}
	}

	// Moving again is idempotent.
	if _, err := acts.SwapRegionEndpoints(ctx, rackacts.SwapRegionEndpointsInput{URLs: []string{dst.URL}, Secret: "region-b"}); err != nil {
		t.Fatal(err)
	}
	if got := agent.dora(t, mac); got != reserved {
		t.Fatalf("after moving twice the machine got %s", got)
	}
}
