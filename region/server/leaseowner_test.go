package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// TestRackLeaseOwnership: a rack writes leases only on subnets of VLANs it serves and never
// over another rack's live lease; what it may not write is rejected and counted.
func TestRackLeaseOwnership(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.register(api.RackRegistration{Name: "rack-a"})
	b := e.register(api.RackRegistration{Name: "rack-b"})
	fabric := e.create(api.KindFabrics, map[string]any{"Name": "f"})["Uuid"]
	subnet := func(vid int, cidr, primary, secondary string) string {
		vlan := e.create(api.KindVLANs, map[string]any{"Fabric": fabric, "VID": vid, "PrimaryRack": primary, "SecondaryRack": secondary, "DHCPOn": true})["Uuid"]
		return e.create(api.KindSubnets, map[string]any{"Name": "s" + jsonString(vid), "CIDR": cidr, "VLAN": vlan})["Uuid"].(string)
	}
	ofA := subnet(1, "10.1.0.0/24", a.Rack.Uuid, "")
	shared := subnet(2, "10.2.0.0/24", a.Rack.Uuid, b.Rack.Uuid)
	now := time.Now().UTC().Truncate(time.Second)
	lease := func(subnet, addr, mac, state string) api.Lease {
		return api.Lease{Addr: addr, MAC: mac, Subnet: subnet, State: state, Start: now, Expires: now.Add(time.Hour)}
	}
	sync := func(rk api.RackRegistered, batch ...api.Lease) api.LeaseSyncResult {
		t.Helper()
		var res api.LeaseSyncResult
		r := doRequest(t, rk.Token, http.MethodPost, e.base+"/api/v1/racks/"+rk.Rack.Uuid+"/leases", batch)
		if r.code != http.StatusOK {
			t.Fatalf("sync as %s: %d %s", rk.Rack.Name, r.code, r.body)
		}
		decodeJSON(t, r, &res)
		return res
	}
	leases := func() map[string]api.Lease {
		var ls []api.Lease
		decodeJSON(t, e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/leases", nil, http.StatusOK), &ls)
		out := map[string]api.Lease{}
		for _, l := range ls {
			out[l.Addr] = l
		}
		return out
	}

	if res := sync(a, lease(ofA, "10.1.0.10", "52:54:00:00:0a:10", "active"), lease(shared, "10.2.0.10", "52:54:00:00:0a:20", "active"),
		lease(shared, "10.2.0.11", "52:54:00:00:0a:21", "released")); res.Stored != 3 {
		t.Fatalf("rack-a's own leases: %+v", res)
	}
	before := leases()

	// rack-b posts "active" leases on rack-a's subnet through its own rack API: all refused.
	attack := make([]api.Lease, 50)
	for i := range attack {
		attack[i] = lease(ofA, "10.1.0."+jsonString(100+i), "52:54:00:00:0b:01", "active")
	}
	attack[0] = lease(ofA, "10.1.0.10", "52:54:00:00:0b:01", "active") // rack-a's client
	if res := sync(b, attack...); res.Stored != 0 || len(res.Rejected) != 50 || !strings.Contains(res.Rejected[0].Error, "not on a VLAN") {
		t.Fatalf("rack-b on rack-a's subnet: stored %d, rejected %d: %+v", res.Stored, len(res.Rejected), res.Rejected[:min(1, len(res.Rejected))])
	}
	// On the VLAN both serve, rack-b may not overwrite rack-a's live lease...
	if res := sync(b, lease(shared, "10.2.0.10", "52:54:00:00:0b:02", "active")); res.Stored != 0 || len(res.Rejected) != 1 || !strings.Contains(res.Rejected[0].Error, "held by rack "+a.Rack.Uuid) {
		t.Fatalf("rack-b over rack-a's live lease: %+v", res)
	}
	if got := leases(); len(got) != len(before) || got["10.1.0.10"].MAC != "52:54:00:00:0a:10" || got["10.2.0.10"].MAC != "52:54:00:00:0a:20" || got["10.2.0.10"].Rack != a.Rack.Uuid {
		t.Fatalf("refused leases changed the stored ones: %+v", got)
	}
	// ...but may reuse an address rack-a released (failover of a shared VLAN).
	if res := sync(b, lease(shared, "10.2.0.11", "52:54:00:00:0b:03", "active")); res.Stored != 1 {
		t.Fatalf("rack-b reusing a released address: %+v", res)
	}
	if got := leases()["10.2.0.11"]; got.Rack != b.Rack.Uuid {
		t.Fatalf("reused lease %+v", got)
	}

	metrics := string(e.mustDo("", http.MethodGet, "/metrics", nil, http.StatusOK).body)
	for _, want := range []string{`ironflow_lease_records_rejected_total{reason="not_served"} 50`, `ironflow_lease_records_rejected_total{reason="other_rack"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
