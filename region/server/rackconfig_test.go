package server_test

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// TestRackConfigLongPoll: a config poll with wait and the current ETag is answered when the
// config changes, with the change; without a change, with 304 once the wait is over; and a
// rack gets at most two waiting polls, a third being answered at once.
func TestRackConfigLongPoll(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rack := e.register(api.RackRegistration{Name: "rack-a"})
	fabric := e.create(api.KindFabrics, map[string]any{"Name": "f"})["Uuid"]
	vlan := e.create(api.KindVLANs, map[string]any{"Name": "v", "Fabric": fabric, "VID": 1, "PrimaryRack": rack.Rack.Uuid, "DHCPOn": true})["Uuid"]
	e.create(api.KindSubnets, map[string]any{"Name": "s", "CIDR": "10.1.0.0/24", "VLAN": vlan})
	path := e.base + "/api/v1/racks/" + rack.Rack.Uuid + "/config"
	poll := func(etag, wait string) response {
		req, _ := http.NewRequest(http.MethodGet, path+"?wait="+wait, nil)
		req.Header.Set("Authorization", "Bearer "+rack.Token)
		req.Header.Set("If-None-Match", etag)
		return send(t, req)
	}
	first := doRequest(t, rack.Token, http.MethodGet, path, nil)
	etag := first.header.Get("ETag")

	start := time.Now()
	if r := poll(etag, "1s"); r.code != http.StatusNotModified || time.Since(start) < time.Second {
		t.Fatalf("long poll without a change: %d after %s, want 304 after the 1s wait", r.code, time.Since(start))
	}

	answers := make(chan response, 2)
	for range 2 {
		go func() { answers <- poll(etag, "50s") }()
	}
	eventually(t, "two long polls waiting", func() bool { return e.configLongPolls() == 2 })
	start = time.Now()
	if r := poll(etag, "50s"); r.code != http.StatusNotModified || time.Since(start) > 10*time.Second {
		t.Fatalf("third long poll of the rack: %d after %s, want 304 at once", r.code, time.Since(start))
	}

	e.create(api.KindMachines, map[string]any{"Name": "m1", "HardwareAddrs": []string{"52:54:00:00:00:01"}, "Address": "10.1.0.10"})
	for range 2 {
		r := <-answers
		var cfg api.RackConfig
		if r.code == http.StatusOK {
			decodeJSON(t, r, &cfg)
		}
		if r.code != http.StatusOK || r.header.Get("ETag") == etag || len(cfg.Reservations) != 1 {
			t.Fatalf("long poll after a change: %d, ETag %q (was %q), %d reservations; want 200 with the new machine",
				r.code, r.header.Get("ETag"), etag, len(cfg.Reservations))
		}
	}
	if n := e.configLongPolls(); n != 0 {
		t.Errorf("%v long polls still counted as waiting", n)
	}
	e.do(api.RoleAdmin, http.MethodGet, "/api/v1/racks/"+rack.Rack.Uuid+"/config?wait=2m", nil).apiError(t, http.StatusBadRequest)
}

var longPollGauge = regexp.MustCompile(`(?m)^ironflow_rack_config_long_polls (\S+)$`)

// configLongPolls reads the region's gauge of waiting config long polls.
func (e *env) configLongPolls() float64 {
	m := longPollGauge.FindSubmatch(e.do("", http.MethodGet, "/metrics", nil).body)
	if m == nil {
		e.t.Fatal("no ironflow_rack_config_long_polls in /metrics")
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

// TestRackConfigDropsExpiredLeases: a cached config is not served past the expiry of a lease it
// carries; the next poll leaves the lease out, with no write in between.
func TestRackConfigDropsExpiredLeases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rack := e.register(api.RackRegistration{Name: "rack-a"})
	fabric := e.create(api.KindFabrics, map[string]any{"Name": "f"})["Uuid"]
	vlan := e.create(api.KindVLANs, map[string]any{"Name": "v", "Fabric": fabric, "VID": 1, "PrimaryRack": rack.Rack.Uuid, "DHCPOn": true})["Uuid"]
	subnet := e.create(api.KindSubnets, map[string]any{"Name": "s", "CIDR": "10.1.0.0/24", "VLAN": vlan})["Uuid"]
	now := time.Now().UTC()
	e.create(api.KindLeases, map[string]any{"Addr": "10.1.0.100", "MAC": "52:54:00:00:01:00", "Subnet": subnet, "State": "active",
		"Start": now, "Expires": now.Add(2 * time.Second)})
	path := e.base + "/api/v1/racks/" + rack.Rack.Uuid + "/config"
	leases := func() int {
		r := doRequest(t, rack.Token, http.MethodGet, path, nil)
		var cfg api.RackConfig
		decodeJSON(t, r, &cfg)
		return len(cfg.Leases)
	}
	if n := leases(); n != 1 {
		t.Fatalf("config carries %d leases, want the active one", n)
	}
	eventually(t, "the expired lease left out", func() bool { return leases() == 0 })
}
