package httpboot

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/rack/regionlink/regionlinktest"
	"github.com/ironflow/ironflow/region/api"
)

// proxied sends one request through the rack and returns the status and, for 200, the echo.
func proxied(rack *testRack, method, path, body string) (int, regionlinktest.Echo, error) {
	req, err := http.NewRequest(method, rack.url+path, strings.NewReader(body))
	if err != nil {
		return 0, regionlinktest.Echo{}, err
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		return 0, regionlinktest.Echo{}, err
	}
	defer resp.Body.Close()
	var echo regionlinktest.Echo
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&echo); err != nil {
			return resp.StatusCode, echo, err
		}
		if echo.Method != method || echo.Path != strings.SplitN(path, "?", 2)[0] || echo.Body != body {
			return resp.StatusCode, echo, fmt.Errorf("echo %+v does not match %s %s %q", echo, method, path, body)
		}
	}
	return resp.StatusCode, echo, nil
}

func mustProxy(t *testing.T, rack *testRack, method, path, body, wantRegion string) regionlinktest.Echo {
	t.Helper()
	code, echo, err := proxied(rack, method, path, body)
	if err != nil || code != http.StatusOK || echo.Region != wantRegion {
		t.Fatalf("%s %s: status %d region %q err %v, want 200 from %q", method, path, code, echo.Region, err, wantRegion)
	}
	return echo
}

// traffic sends GETs through the rack from several goroutines until stop is called, and
// returns how many failed.
func traffic(t *testing.T, rack *testRack, workers int) (stop func() (failures int64)) {
	var failed atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				method, body := http.MethodGet, ""
				if i%2 == 1 {
					method, body = http.MethodPut, fmt.Sprintf("worker %d request %d", w, i)
				}
				code, _, err := proxied(rack, method, fmt.Sprintf("/metadata/w%d/%d", w, i), body)
				if err != nil || code != http.StatusOK {
					failed.Add(1)
					t.Logf("worker %d request %d: status %d err %v", w, i, code, err)
				}
			}
		})
	}
	return func() int64 {
		close(done)
		wg.Wait()
		return failed.Load()
	}
}

func TestProxyFailover(t *testing.T) {
	a, b := regionlinktest.Start(t, "a"), regionlinktest.Start(t, "b")
	rack := startRack(t, machines{}, a.URL, b.URL)
	rack.runLink(t)

	echo := mustProxy(t, rack, http.MethodGet, "/metadata/latest/meta-data/instance-id?v=1", "", "a")
	if echo.RawQuery != "v=1" || echo.Header.Get("X-Forwarded-For") != "127.0.0.1" {
		t.Fatalf("query %q, X-Forwarded-For %q", echo.RawQuery, echo.Header.Get("X-Forwarded-For"))
	}
	mustProxy(t, rack, http.MethodPost, "/api/v1/agent/jobs", `{"Machine":"m1"}`, "a")

	// Kill region a while traffic flows: every request is answered by b.
	stop := traffic(t, rack, 4)
	testutil.Eventually(t, 10*time.Second, "traffic through a", func() bool { return a.Echoed() > 20 })
	a.Close()
	testutil.Eventually(t, 10*time.Second, "traffic through b", func() bool { return b.Echoed() > 20 })
	if failures := stop(); failures != 0 {
		t.Fatalf("%d proxied requests failed while region a died", failures)
	}
	mustProxy(t, rack, http.MethodPost, "/api/v1/agent/jobs", `{"Machine":"m2"}`, "b")
	testutil.Eventually(t, 10*time.Second, "failover to b", func() bool { return rack.link.Current().String() == b.URL })
	if _, body := get(t, rack.url+"/metrics"); !contains(body, `ironflow_rack_current_region{url="`+b.URL+`"} 1`) {
		t.Fatalf("metrics do not show region b as current:\n%s", body)
	}

	// Every region down: 502 with the API's error body.
	b.Close()
	resp, body := get(t, rack.url+"/metadata/latest")
	var apiErr api.Error
	if resp.StatusCode != http.StatusBadGateway || json.Unmarshal(body, &apiErr) != nil || apiErr.Code != http.StatusBadGateway {
		t.Fatalf("with every region down: status %d body %s, want 502 JSON", resp.StatusCode, body)
	}
	if _, body := get(t, rack.url+"/metrics"); !contains(body, "ironflow_httpboot_proxy_errors_total 1") {
		t.Fatalf("metrics do not count the proxy error:\n%s", body)
	}

	// The preferred region returns: the rack goes back to it.
	a.Restart()
	testutil.Eventually(t, 10*time.Second, "failover back to a", func() bool { return rack.link.Current().String() == a.URL })
	mustProxy(t, rack, http.MethodGet, "/metadata/latest", "", "a")
}

func TestProxyPassesRedirects(t *testing.T) {
	a := regionlinktest.Start(t, "a")
	rack := startRack(t, machines{}, a.URL)
	resp, _ := get(t, rack.url+"/api/v1/agent/machines/m1?redirect=http://other.example:5240/api/v1/agent/machines/m1")
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "http://other.example:5240/api/v1/agent/machines/m1" {
		t.Fatalf("status %d Location %q, want the region's 307", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestSwapEndpointsUnderTraffic(t *testing.T) {
	old, moved := regionlinktest.Start(t, "old"), regionlinktest.Start(t, "new")
	rack := startRack(t, machines{}, old.URL)
	rack.runLink(t)
	const workers = 8
	stop := traffic(t, rack, workers)
	testutil.Eventually(t, 10*time.Second, "traffic through the old region", func() bool { return old.Echoed() > 50 })
	if err := rack.link.SwapEndpoints([]string{moved.URL}); err != nil {
		t.Fatal(err)
	}
	atSwap := old.Echoed()
	testutil.Eventually(t, 10*time.Second, "traffic through the new region", func() bool { return moved.Echoed() > 50 })
	if failures := stop(); failures != 0 {
		t.Fatalf("%d proxied requests failed across the swap", failures)
	}
	if late := old.Echoed() - atSwap; late > workers {
		t.Fatalf("old region got %d requests after the swap; at most %d were in flight", late, workers)
	}
	if got := rack.link.Current().String(); got != moved.URL {
		t.Fatalf("current %s after swap, want %s", got, moved.URL)
	}
}

func TestHealthz(t *testing.T) {
	a := regionlinktest.Start(t, "a")
	rack := startRack(t, machines{}, a.URL)
	resp, body := get(t, rack.url+"/healthz")
	if resp.StatusCode != http.StatusOK || !contains(body, `"Region":"`+a.URL+`"`) {
		t.Fatalf("healthz: %d %s", resp.StatusCode, body)
	}
}
