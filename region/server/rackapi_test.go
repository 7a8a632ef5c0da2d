package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// rackSecret reads the region's minted rack secret as admin.
func (e *env) rackSecret() string {
	e.t.Helper()
	var s api.RackSecret
	decodeJSON(e.t, e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/racks/secret", nil, http.StatusOK), &s)
	if s.Secret == "" {
		e.t.Fatal("empty rack secret")
	}
	return s.Secret
}

// register registers a rack with the region's secret.
func (e *env) register(reg api.RackRegistration) api.RackRegistered {
	e.t.Helper()
	r := doRequest(e.t, e.rackSecret(), http.MethodPost, e.base+"/api/v1/racks/register", reg)
	if r.code != http.StatusOK {
		e.t.Fatalf("register %s: status %d: %s", reg.Name, r.code, r.body)
	}
	var out api.RackRegistered
	decodeJSON(e.t, r, &out)
	return out
}

func decodeJSON(t testing.TB, r response, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("answer %d: %v: %s", r.code, err, r.body)
	}
}

func TestRackSecretIsForAdminsOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.rackSecret()
	if again := e.rackSecret(); again != first {
		t.Fatalf("secret changed from %q to %q", first, again)
	}
	for _, role := range []string{api.RoleOperator, api.RoleReadonly, api.RoleRack} {
		e.do(role, http.MethodGet, "/api/v1/racks/secret", nil).apiError(t, http.StatusForbidden)
	}
	e.do("", http.MethodGet, "/api/v1/racks/secret", nil).apiError(t, http.StatusUnauthorized)
}

func TestRackRegistration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	secret := e.rackSecret()
	reg := api.RackRegistration{Name: "rack-a", Interfaces: []string{"eth1"}, Version: "v1"}
	refused := []struct {
		name, token string
		body        any
		code        int
	}{
		{"no secret", "", reg, http.StatusUnauthorized},
		{"wrong secret", secret + "x", reg, http.StatusUnauthorized},
		{"operator token", e.tokens[api.RoleOperator], reg, http.StatusForbidden},
		{"malformed body", secret, `{"Name":`, http.StatusBadRequest},
		{"unknown field", secret, `{"Name":"x","Bogus":1}`, http.StatusBadRequest},
		{"no name", secret, api.RackRegistration{}, http.StatusUnprocessableEntity},
		{"bad uuid", secret, api.RackRegistration{Uuid: "nope", Name: "x"}, http.StatusUnprocessableEntity},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			doRequest(t, c.token, http.MethodPost, e.base+"/api/v1/racks/register", c.body).apiError(t, c.code)
		})
	}
	if racks := e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/racks", nil, http.StatusOK).list(t); len(racks) != 0 {
		t.Fatalf("refused registrations created racks: %v", racks)
	}

	first := e.register(reg)
	if first.Rack.Uuid == "" || first.Token == "" || first.Rack.Status != api.RackOnline || first.Rack.LastSeen.IsZero() {
		t.Fatalf("registered %+v", first)
	}
	if !slices.Contains(first.Region.Endpoints, e.base) || first.Region.URL != e.base || first.Region.Uuid == "" {
		t.Fatalf("region info %+v does not describe %s", first.Region, e.base)
	}
	if !slices.Equal(first.Rack.RegionEndpoints, first.Region.Endpoints) {
		t.Errorf("rack RegionEndpoints %v, want the cluster's %v", first.Rack.RegionEndpoints, first.Region.Endpoints)
	}

	// Again with the same Uuid and the shared secret: refused, nothing changes (no takeover).
	doRequest(t, secret, http.MethodPost, e.base+"/api/v1/racks/register",
		api.RackRegistration{Uuid: first.Rack.Uuid, Name: "evil"}).apiError(t, http.StatusConflict)
	// With its own token: the same rack, renamed, and a fresh token; both tokens work.
	var again api.RackRegistered
	decodeJSON(t, doRequest(t, first.Token, http.MethodPost, e.base+"/api/v1/racks/register",
		api.RackRegistration{Uuid: first.Rack.Uuid, Name: "rack-a2", Version: "v2"}), &again)
	if again.Rack.Uuid != first.Rack.Uuid || again.Token == first.Token || again.Rack.Name != "rack-a2" || again.Rack.Version != "v2" {
		t.Fatalf("re-registration %+v after %+v", again, first)
	}
	if racks := e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/racks", nil, http.StatusOK).list(t); len(racks) != 1 {
		t.Fatalf("%d racks after registering one twice", len(racks))
	}
	for _, tok := range []string{first.Token, again.Token} {
		r := doRequest(t, tok, http.MethodGet, e.base+"/api/v1/racks/"+first.Rack.Uuid+"/config", nil)
		if r.code != http.StatusOK {
			t.Fatalf("config with a rack token: %d %s", r.code, r.body)
		}
	}

	// A rack moving in from another region keeps its UUID.
	moved := "0d000000-0000-4000-8000-0000000000aa"
	got := e.register(api.RackRegistration{Uuid: moved, Name: "rack-b"})
	if got.Rack.Uuid != moved {
		t.Fatalf("registered with Uuid %s, got %s", moved, got.Rack.Uuid)
	}
	// Another rack may not take a registered name.
	doRequest(t, secret, http.MethodPost, e.base+"/api/v1/racks/register", api.RackRegistration{Name: "rack-b"}).apiError(t, http.StatusConflict)
	// A rack's token registers no other rack; an admin re-registers any.
	doRequest(t, got.Token, http.MethodPost, e.base+"/api/v1/racks/register", api.RackRegistration{Uuid: first.Rack.Uuid, Name: "x"}).apiError(t, http.StatusForbidden)
	doRequest(t, got.Token, http.MethodPost, e.base+"/api/v1/racks/register", api.RackRegistration{Name: "fresh"}).apiError(t, http.StatusForbidden)
	if r := doRequest(t, e.tokens[api.RoleAdmin], http.MethodPost, e.base+"/api/v1/racks/register", api.RackRegistration{Uuid: moved, Name: "rack-b"}); r.code != http.StatusOK {
		t.Fatalf("admin re-registration: %d %s", r.code, r.body)
	}
	// A deleted rack's tokens die with it; its UUID may then register afresh with the secret.
	e.mustDo(api.RoleAdmin, http.MethodDelete, "/api/v1/racks/"+moved, nil, http.StatusNoContent)
	doRequest(t, got.Token, http.MethodGet, e.base+"/api/v1/racks/"+moved+"/config", nil).apiError(t, http.StatusUnauthorized)
	e.register(api.RackRegistration{Uuid: moved, Name: "rack-b"})

	events := e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/events?Kind=racks&Key="+first.Rack.Uuid, nil, http.StatusOK).list(t)
	if len(events) != 2 || events[0]["Actor"] != "rack:"+first.Rack.Uuid {
		t.Errorf("events of the rack: %v", events)
	}
}

func TestRackConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rack := e.register(api.RackRegistration{Name: "rack-a"})
	other := e.register(api.RackRegistration{Name: "rack-b"})
	id := rack.Rack.Uuid
	fabric := e.create(api.KindFabrics, map[string]any{"Name": "f"})["Uuid"]
	vlan := func(vid int, primary, secondary string, dhcp bool) string {
		return e.create(api.KindVLANs, map[string]any{"Name": "v" + jsonString(vid), "Fabric": fabric, "VID": vid,
			"PrimaryRack": primary, "SecondaryRack": secondary, "DHCPOn": dhcp})["Uuid"].(string)
	}
	primary := vlan(1, id, "", true)
	secondary := vlan(2, other.Rack.Uuid, id, true)
	dhcpOff := vlan(3, id, "", false)
	othersOnly := vlan(4, other.Rack.Uuid, "", true)
	subnet := func(name, cidr, vlan string) string {
		return e.create(api.KindSubnets, map[string]any{"Name": name, "CIDR": cidr, "VLAN": vlan,
			"DynamicRange": map[string]any{"Start": cidr[:len(cidr)-4] + "100", "End": cidr[:len(cidr)-4] + "200"}})["Uuid"].(string)
	}
	s1 := subnet("s1", "10.1.0.0/24", primary)
	s2 := subnet("s2", "10.2.0.0/24", secondary)
	subnet("s3", "10.3.0.0/24", dhcpOff)
	s4 := subnet("s4", "10.4.0.0/24", othersOnly)
	machine := func(name, mac, addr string) string {
		m := map[string]any{"Name": name, "Address": addr, "BootEnv": "local"}
		if mac != "" {
			m["HardwareAddrs"] = []string{mac, "52:54:00:ff:ff:" + name[len(name)-2:]}
		}
		return e.create(api.KindMachines, m)["Uuid"].(string)
	}
	m1 := machine("m01", "52:54:00:00:00:01", "10.1.0.10")
	machine("m02", "", "10.1.0.11")                  // no MAC
	machine("m03", "52:54:00:00:00:03", "")          // no address
	machine("m04", "52:54:00:00:00:04", "10.3.0.10") // subnet of a VLAN without DHCP
	m5 := machine("m05", "52:54:00:00:00:05", "10.2.0.10")
	now := time.Now().UTC()
	lease := func(addr, mac, subnet, state string, expires time.Time) {
		e.create(api.KindLeases, map[string]any{"Addr": addr, "MAC": mac, "Subnet": subnet, "State": state,
			"Start": now.Add(-time.Hour), "Expires": expires})
	}
	lease("10.1.0.100", "52:54:00:00:01:00", s1, "active", now.Add(time.Hour))
	lease("10.1.0.101", "52:54:00:00:01:01", s1, "released", now)
	lease("10.2.0.100", "52:54:00:00:02:00", s2, "active", now.Add(-time.Minute)) // expired
	lease("10.4.0.100", "52:54:00:00:04:00", s4, "active", now.Add(time.Hour))

	path := "/api/v1/racks/" + id + "/config"
	r := doRequest(t, rack.Token, http.MethodGet, e.base+path, nil)
	if r.code != http.StatusOK {
		t.Fatalf("config: %d %s", r.code, r.body)
	}
	var cfg api.RackConfig
	decodeJSON(t, r, &cfg)
	uuids := func(n int, f func(int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	checks := []struct {
		what      string
		got, want []string
	}{
		{"VLANs", uuids(len(cfg.VLANs), func(i int) string { return cfg.VLANs[i].Uuid }), []string{primary, secondary}},
		{"Subnets", uuids(len(cfg.Subnets), func(i int) string { return cfg.Subnets[i].Uuid }), []string{s1, s2}},
		{"Reservations", uuids(len(cfg.Reservations), func(i int) string { return cfg.Reservations[i].Machine }), []string{m1, m5}},
		{"Leases", uuids(len(cfg.Leases), func(i int) string { return cfg.Leases[i].Addr }), []string{"10.1.0.100"}},
	}
	for _, c := range checks {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	wantRes := api.Reservation{MAC: "52:54:00:00:00:01", Addr: "10.1.0.10", Hostname: "m01", Machine: m1, Subnet: s1, BootEnv: "local"}
	if len(cfg.Reservations) > 0 && cfg.Reservations[0] != wantRes {
		t.Errorf("reservation %+v, want %+v", cfg.Reservations[0], wantRes)
	}
	if cfg.Rack.Uuid != id || !cfg.Rack.LastSeen.IsZero() || cfg.Rack.Status != "" {
		t.Errorf("config Rack %+v: want the rack without LastSeen and Status", cfg.Rack)
	}

	// The ETag holds until what the rack serves changes; a heartbeat changes nothing.
	etag := r.header.Get("ETag")
	conditional := func() response {
		req, _ := http.NewRequest(http.MethodGet, e.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+rack.Token)
		req.Header.Set("If-None-Match", `"other", `+etag)
		return send(t, req)
	}
	doRequest(t, rack.Token, http.MethodPost, e.base+"/api/v1/racks/"+id+"/heartbeat", api.RackHeartbeat{Degraded: true, Reason: "testing", CurrentRegion: e.base})
	if c := conditional(); c.code != http.StatusNotModified || len(c.body) != 0 || c.header.Get("ETag") != etag {
		t.Fatalf("conditional GET: %d %q ETag %q, want 304 with ETag %s", c.code, c.body, c.header.Get("ETag"), etag)
	}
	// Nor do the rack's own leases: it has them, and its uploads must not make it re-fetch.
	own := []api.Lease{{Addr: "10.1.0.150", MAC: "52:54:00:00:01:50", Subnet: s1, State: "active", Start: now, Expires: now.Add(time.Hour)}}
	if res := doRequest(t, rack.Token, http.MethodPost, e.base+"/api/v1/racks/"+id+"/leases", own); res.code != http.StatusOK {
		t.Fatalf("lease sync: %d %s", res.code, res.body)
	}
	if c := conditional(); c.code != http.StatusNotModified {
		t.Fatalf("conditional GET after the rack's own lease: %d, want 304: %s", c.code, c.body)
	}
	machine("m06", "52:54:00:00:00:06", "10.1.0.12")
	c := conditional()
	if c.code != http.StatusOK || c.header.Get("ETag") == etag {
		t.Fatalf("conditional GET after a change: %d, ETag %q (was %q)", c.code, c.header.Get("ETag"), etag)
	}
	etag = c.header.Get("ETag")
	// A lease of another rack on a served subnet is in the config; the rack's own is not.
	theirs := []api.Lease{{Addr: "10.2.0.150", MAC: "52:54:00:00:02:50", Subnet: s2, State: "active", Start: now, Expires: now.Add(time.Hour)}}
	if res := doRequest(t, other.Token, http.MethodPost, e.base+"/api/v1/racks/"+other.Rack.Uuid+"/leases", theirs); res.code != http.StatusOK {
		t.Fatalf("lease sync of the other rack: %d %s", res.code, res.body)
	}
	if c = conditional(); c.code != http.StatusOK {
		t.Fatalf("conditional GET after the other rack's lease: %d, want 200: %s", c.code, c.body)
	}
	decodeJSON(t, c, &cfg)
	if addrs := uuids(len(cfg.Leases), func(i int) string { return cfg.Leases[i].Addr }); !slices.Equal(addrs, []string{"10.1.0.100", "10.2.0.150"}) {
		t.Fatalf("leases after the other rack's lease %v, want 10.1.0.100 and 10.2.0.150", addrs)
	}

	// Who may read it.
	doRequest(t, other.Token, http.MethodGet, e.base+path, nil).apiError(t, http.StatusForbidden)
	e.mustDo(api.RoleReadonly, http.MethodGet, path, nil, http.StatusOK)
	e.tokens[api.RoleMachine] = e.machineToken(m1)
	e.do(api.RoleMachine, http.MethodGet, path, nil).apiError(t, http.StatusForbidden)
	e.do(api.RoleAdmin, http.MethodGet, "/api/v1/racks/"+api.NilUUID+"/config", nil).apiError(t, http.StatusNotFound)
	e.do(api.RoleAdmin, http.MethodGet, "/api/v1/racks/Name:rack-a/config", nil).apiError(t, http.StatusUnprocessableEntity)
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestRackHeartbeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rack := e.register(api.RackRegistration{Name: "rack-a"})
	other := e.register(api.RackRegistration{Name: "rack-b"})
	path := "/api/v1/racks/" + rack.Rack.Uuid
	beat := func(token string, hb any) response {
		return doRequest(t, token, http.MethodPost, e.base+path+"/heartbeat", hb)
	}
	shown := func() api.Rack {
		var r api.Rack
		decodeJSON(t, e.mustDo(api.RoleAdmin, http.MethodGet, path, nil, http.StatusOK), &r)
		return r
	}
	steps := []struct {
		name       string
		hb         api.RackHeartbeat
		wantStatus string
		wantReason string
	}{
		{"degraded", api.RackHeartbeat{Version: "v2", Degraded: true, Reason: "no rack config yet", CurrentRegion: "http://r1"}, api.RackDegraded, "no rack config yet"},
		{"healthy again", api.RackHeartbeat{Version: "v2", CurrentRegion: "http://r2"}, api.RackOnline, ""},
	}
	for _, s := range steps {
		before := shown().LastSeen
		r := beat(rack.Token, s.hb)
		if r.code != http.StatusOK {
			t.Fatalf("%s: heartbeat %d %s", s.name, r.code, r.body)
		}
		var answered api.Rack
		decodeJSON(t, r, &answered)
		got := shown()
		if answered.Status != s.wantStatus || got.Status != s.wantStatus || got.Meta["status-reason"] != s.wantReason ||
			got.Meta["current-region"] != s.hb.CurrentRegion || got.Version != "v2" || !got.LastSeen.After(before) {
			t.Errorf("%s: answered %+v, shown %+v", s.name, answered, got)
		}
	}

	// A transfer pauses the rack; heartbeats keep it paused.
	e.mustDo(api.RoleAdmin, http.MethodPatch, path, map[string]any{"Status": api.RackPaused}, http.StatusOK)
	beat(rack.Token, api.RackHeartbeat{})
	if got := shown(); got.Status != api.RackPaused {
		t.Errorf("paused rack shows %q after a heartbeat", got.Status)
	}

	beat(other.Token, api.RackHeartbeat{}).apiError(t, http.StatusForbidden)
	beat(rack.Token, `{"Degraded":"yes"}`).apiError(t, http.StatusBadRequest)
	e.do(api.RoleReadonly, http.MethodPost, path+"/heartbeat", api.RackHeartbeat{}).apiError(t, http.StatusForbidden)
	e.do(api.RoleAdmin, http.MethodPost, "/api/v1/racks/"+api.NilUUID+"/heartbeat", api.RackHeartbeat{}).apiError(t, http.StatusNotFound)
}

func TestRackLeaseSync(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rack := e.register(api.RackRegistration{Name: "rack-a"})
	other := e.register(api.RackRegistration{Name: "rack-b"})
	fabric := e.create(api.KindFabrics, map[string]any{"Name": "f"})["Uuid"]
	vlan := e.create(api.KindVLANs, map[string]any{"Fabric": fabric, "VID": 1, "PrimaryRack": rack.Rack.Uuid, "DHCPOn": true})["Uuid"]
	subnet := e.create(api.KindSubnets, map[string]any{"Name": "s1", "CIDR": "10.1.0.0/24", "VLAN": vlan})["Uuid"].(string)
	path := e.base + "/api/v1/racks/" + rack.Rack.Uuid + "/leases"
	now := time.Now().UTC().Truncate(time.Second)
	lease := func(addr, mac, state string) api.Lease {
		return api.Lease{Addr: addr, MAC: mac, Subnet: subnet, State: state, Start: now, Expires: now.Add(time.Hour)}
	}
	stored := func() map[string]api.Lease {
		var ls []api.Lease
		decodeJSON(t, e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/leases", nil, http.StatusOK), &ls)
		out := map[string]api.Lease{}
		for _, l := range ls {
			out[l.Addr] = l
		}
		return out
	}
	syncEvents := func() int {
		return len(e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/events?Kind=leases&Key="+rack.Rack.Uuid, nil, http.StatusOK).list(t))
	}

	batch := []api.Lease{
		lease("10.1.0.100", "52:54:00:00:01:00", "active"),
		lease("10.1.0.101", "52:54:00:00:01:01", "active"),
		lease("10.1.0.101", "52:54:00:00:01:01", "released"), // a later state of the same address
		{Addr: "10.9.0.1", MAC: "52:54:00:00:09:01", Subnet: api.NilUUID, State: "active", Start: now, Expires: now.Add(time.Hour)},
	}
	r := doRequest(t, rack.Token, http.MethodPost, path, batch)
	var res api.LeaseSyncResult
	decodeJSON(t, r, &res)
	if r.code != http.StatusOK || res.Stored != 2 || len(res.Rejected) != 1 || res.Rejected[0].Index != 3 {
		t.Fatalf("sync: %d %s, want 2 stored and the lease of an unknown subnet rejected", r.code, r.body)
	}
	got := stored()
	if len(got) != 2 || got["10.1.0.100"].Rack != rack.Rack.Uuid || got["10.1.0.101"].State != "released" {
		t.Fatalf("stored leases %+v", got)
	}
	if n := syncEvents(); n != 1 {
		t.Fatalf("%d audit events for one batch, want 1", n)
	}

	// A renewal updates in place.
	renewed := lease("10.1.0.100", "52:54:00:00:01:00", "active")
	renewed.Expires = now.Add(2 * time.Hour)
	doRequest(t, rack.Token, http.MethodPost, path, []api.Lease{renewed})
	if l := stored()["10.1.0.100"]; !l.Expires.Equal(renewed.Expires) {
		t.Fatalf("renewed lease expires %s, want %s", l.Expires, renewed.Expires)
	}

	// Bad batches change nothing.
	for _, c := range []struct {
		name  string
		token string
		body  any
		code  int
	}{
		{"not a list", rack.Token, lease("10.1.0.103", "52:54:00:00:01:03", "active"), http.StatusBadRequest},
		{"another rack's token", other.Token, []api.Lease{lease("10.1.0.103", "52:54:00:00:01:03", "active")}, http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			doRequest(t, c.token, http.MethodPost, path, c.body).apiError(t, c.code)
		})
	}

	// Bad leases are refused one by one; the good one of the batch is stored.
	foreign := lease("10.1.0.104", "52:54:00:00:01:04", "active")
	foreign.Rack = other.Rack.Uuid
	nul := lease("10.1.0.105", "52:54:00:00:01:05", "active")
	nul.Hostname = "evil\x00host"
	long := lease("10.1.0.106", "52:54:00:00:01:06", "active")
	long.Hostname = strings.Repeat("h", 256)
	mixed := []api.Lease{
		foreign,
		lease("10.1.0.107", "nope", "active"),
		lease("10.1.0.108", "52:54:00:00:01:08", "bound"),
		lease("10.2.0.1", "52:54:00:00:01:09", "active"), // outside its subnet
		nul,
		lease("10.1.0.103", "52:54:00:00:01:03", "active"),
		long,
	}
	r = doRequest(t, rack.Token, http.MethodPost, path, mixed)
	res = api.LeaseSyncResult{}
	decodeJSON(t, r, &res)
	var indices []int
	for _, rej := range res.Rejected {
		indices = append(indices, rej.Index)
		if rej.IP != mixed[rej.Index].Addr || rej.Error == "" {
			t.Errorf("rejection %+v does not describe lease %d", rej, rej.Index)
		}
	}
	if r.code != http.StatusOK || res.Stored != 1 || !slices.Equal(indices, []int{0, 1, 2, 3, 4, 6}) {
		t.Fatalf("mixed batch: %d %s, want 1 stored and all but index 5 rejected", r.code, r.body)
	}
	if got := stored(); len(got) != 3 || got["10.1.0.103"].State != "active" {
		t.Fatalf("after the mixed batch: %+v", got)
	}
	if n := syncEvents(); n != 3 {
		t.Fatalf("%d sync events after three accepted batches", n)
	}
	q := url.Values{"Rack": {rack.Rack.Uuid}}
	if len(e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/leases?"+q.Encode(), nil, http.StatusOK).list(t)) != 3 {
		t.Error("leases are not filed under the syncing rack")
	}
}

// TestRackLeaseNamesOnlyItsMACsMachine: a lease's MachineRef puts its address under that
// machine's name in DNS, so a rack may name only the machine that has the lease's MAC; a
// lease naming another machine is refused on its own and counted.
func TestRackLeaseNamesOnlyItsMACsMachine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rack := e.register(api.RackRegistration{Name: "rack-a"})
	fabric := e.create(api.KindFabrics, map[string]any{"Name": "f"})["Uuid"]
	vlan := e.create(api.KindVLANs, map[string]any{"Fabric": fabric, "VID": 1, "PrimaryRack": rack.Rack.Uuid, "DHCPOn": true})["Uuid"]
	subnet := e.create(api.KindSubnets, map[string]any{"Name": "s1", "CIDR": "10.1.0.0/24", "VLAN": vlan})["Uuid"].(string)
	db := e.create(api.KindMachines, map[string]any{"Name": "db01", "HardwareAddrs": []string{"52:54:00:00:02:01"}})["Uuid"].(string)
	vm := e.create(api.KindMachines, map[string]any{"Name": "vm01", "HardwareAddrs": []string{"52:54:00:00:02:02"}})["Uuid"].(string)
	now := time.Now().UTC().Truncate(time.Second)
	lease := func(addr, mac, machine string) api.Lease {
		return api.Lease{Addr: addr, MAC: mac, Subnet: subnet, State: "active", Start: now, Expires: now.Add(time.Hour), MachineRef: machine}
	}
	batch := []api.Lease{
		lease("10.1.0.10", "52:54:00:00:02:02", db), // vm01's MAC under db01's name
		lease("10.1.0.11", "52:54:00:00:02:03", db), // a MAC of no machine under db01's name
		lease("10.1.0.12", "52:54:00:00:02:02", vm),
	}
	r := doRequest(t, rack.Token, http.MethodPost, e.base+"/api/v1/racks/"+rack.Rack.Uuid+"/leases", batch)
	var res api.LeaseSyncResult
	decodeJSON(t, r, &res)
	if r.code != http.StatusOK || res.Stored != 1 || len(res.Rejected) != 2 || res.Rejected[0].Index != 0 || res.Rejected[1].Index != 1 ||
		!strings.Contains(res.Rejected[0].Error, "names machine "+db) {
		t.Fatalf("sync: %d %s, want the leases naming db01 refused", r.code, r.body)
	}
	if ls := e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/leases?MachineRef="+db, nil, http.StatusOK).list(t); len(ls) != 0 {
		t.Errorf("leases stored under db01: %v", ls)
	}
	metrics := string(e.mustDo("", http.MethodGet, "/metrics", nil, http.StatusOK).body)
	if want := fmt.Sprintf("ironflow_lease_records_rejected_total{reason=%q} 2", store.RejectWrongMachine); !strings.Contains(metrics, want) {
		t.Errorf("metrics lack %s", want)
	}
}
