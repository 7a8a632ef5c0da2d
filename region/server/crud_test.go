package server_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// kindCase is the happy path of one kind: an object to create (given the fixtures), the key it
// is addressed by, a filter that finds it, and a string field that PUT and PATCH change.
type kindCase struct {
	kind   string
	obj    func(f fixtures) map[string]any
	key    func(created map[string]any) string
	filter string // field of a list filter matching the created object
	field  string
}

func byUuid(o map[string]any) string { return o["Uuid"].(string) }
func byName(o map[string]any) string { return o["Name"].(string) }

var kindCases = []kindCase{
	{api.KindMachines, func(f fixtures) map[string]any {
		return map[string]any{"Name": "birdy", "HardwareAddrs": []string{"52:54:00:AA:BB:CC"}, "Params": map[string]any{"n": 1}}
	}, byUuid, "Name", "Description"},
	{api.KindJobs, func(f fixtures) map[string]any {
		return map[string]any{"Machine": f.machine, "State": api.JobRunning, "Task": "stage:hello-world",
			"StartTime": "2022-09-15T15:22:35.937594733-04:00"}
	}, byUuid, "Machine", "State"},
	{api.KindProfiles, func(f fixtures) map[string]any {
		return map[string]any{"Name": "example-profile", "Params": map[string]any{"a": "b"}}
	}, byName, "Name", "Description"},
	{api.KindPools, func(f fixtures) map[string]any {
		return map[string]any{"Name": "gold"}
	}, byName, "Name", "Description"},
	{api.KindPods, func(f fixtures) map[string]any {
		return map[string]any{"Name": "kvm-01", "Type": "virsh", "Rack": f.rack, "Pool": "default", "PowerAddress": "qemu+ssh://10.0.0.9/system"}
	}, byUuid, "Name", "PowerAddress"},
	{api.KindFabrics, func(f fixtures) map[string]any {
		return map[string]any{"Name": "fabric-1"}
	}, byUuid, "Name", "Description"},
	{api.KindVLANs, func(f fixtures) map[string]any {
		return map[string]any{"Name": "vlan-20", "Fabric": f.fabric, "VID": 20, "PrimaryRack": f.rack}
	}, byUuid, "Name", "Name"},
	{api.KindSubnets, func(f fixtures) map[string]any {
		return map[string]any{"Name": "net-1", "CIDR": "10.1.0.0/24", "VLAN": f.vlan, "Gateway": "10.1.0.1"}
	}, byUuid, "Name", "Gateway"},
	{api.KindLeases, func(f fixtures) map[string]any {
		return map[string]any{"Addr": "10.0.0.5", "MAC": "52:54:00:00:00:05", "Subnet": f.subnet, "Rack": f.rack,
			"State": "active", "Start": "2026-11-30T06:00:00Z", "Expires": "2026-11-30T07:00:00Z"}
	}, func(o map[string]any) string { return "Addr:" + o["Addr"].(string) }, "MAC", "Hostname"},
	{api.KindRacks, func(f fixtures) map[string]any {
		return map[string]any{"Name": "rack-2", "Status": api.RackOnline, "RegionEndpoints": []string{"http://127.0.0.1:5240"}}
	}, byUuid, "Name", "Version"},
	{api.KindUsers, func(f fixtures) map[string]any {
		return map[string]any{"Name": "alice", "Role": api.RoleOperator}
	}, byName, "Name", "Role"},
}

// newValue is a valid new value of a kind's changed field.
func newValue(c kindCase, step string) string {
	switch c.field {
	case "State":
		return map[string]string{"put": api.JobFinished, "patch": api.JobFailed}[step]
	case "Role":
		return map[string]string{"put": api.RoleReadonly, "patch": api.RoleRack}[step]
	case "Gateway":
		return map[string]string{"put": "10.1.0.254", "patch": "10.1.0.253"}[step]
	}
	return c.kind + "-" + step
}

// TestCRUDEveryKind runs list, create, show, replace, patch and delete for every kind.
func TestCRUDEveryKind(t *testing.T) {
	t.Parallel()
	for _, c := range kindCases {
		t.Run(c.kind, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			f := e.fixtures()
			coll := "/api/v1/" + c.kind

			created := e.create(c.kind, c.obj(f))
			for name, v := range c.obj(f) {
				if name == "HardwareAddrs" || name == "StartTime" || name == "Start" || name == "Expires" || name == "Params" {
					continue // normalised by the store, compared below where it matters
				}
				if !reflect.DeepEqual(created[name], jsonValue(t, v)) {
					t.Errorf("created %s = %v, want %v", name, created[name], v)
				}
			}
			key := c.key(created)
			item := coll + "/" + url.PathEscape(key)

			shown := e.mustDo(api.RoleAdmin, http.MethodGet, item, nil, http.StatusOK).json(t)
			if !reflect.DeepEqual(shown, created) {
				t.Errorf("GET %s = %v, want the created %v", item, shown, created)
			}

			list := e.mustDo(api.RoleAdmin, http.MethodGet, coll+"?"+c.filter+"="+url.QueryEscape(created[c.filter].(string)), nil, http.StatusOK).list(t)
			if len(list) != 1 || !reflect.DeepEqual(list[0], created) {
				t.Errorf("list %s=%v = %v, want just the created object", c.filter, created[c.filter], list)
			}

			put := copyMap(shown)
			put[c.field] = newValue(c, "put")
			replaced := e.mustDo(api.RoleAdmin, http.MethodPut, item, put, http.StatusOK).json(t)
			if !reflect.DeepEqual(replaced, put) {
				t.Errorf("PUT answered %v, want %v", replaced, put)
			}
			if c.field == "Name" { // a rename: the old key no longer finds it
				key = c.key(replaced)
				item = coll + "/" + url.PathEscape(key)
			}

			patched := e.mustDo(api.RoleAdmin, http.MethodPatch, item, map[string]any{c.field: newValue(c, "patch")}, http.StatusOK).json(t)
			wantPatched := copyMap(replaced)
			wantPatched[c.field] = newValue(c, "patch")
			if !reflect.DeepEqual(patched, wantPatched) {
				t.Errorf("PATCH answered %v, want %v", patched, wantPatched)
			}
			if c.field == "Name" {
				item = coll + "/" + url.PathEscape(c.key(patched))
			}
			if got := e.mustDo(api.RoleAdmin, http.MethodGet, item, nil, http.StatusOK).json(t); !reflect.DeepEqual(got, wantPatched) {
				t.Errorf("GET after PATCH = %v, want %v", got, wantPatched)
			}

			e.mustDo(api.RoleAdmin, http.MethodDelete, item, nil, http.StatusNoContent)
			e.do(api.RoleAdmin, http.MethodGet, item, nil).apiError(t, http.StatusNotFound)
		})
	}
}

// TestPatchSemantics checks merge patch details on a machine: nested maps merge, null
// removes, absent fields stay.
func TestPatchSemantics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.create(api.KindMachines, map[string]any{"Name": "birdy", "Description": "keep",
		"Meta": map[string]string{"a": "1", "b": "2"}, "Params": map[string]any{"x": map[string]any{"y": 1, "z": 2}}})
	item := "/api/v1/machines/" + m["Uuid"].(string)
	got := e.mustDo(api.RoleOperator, http.MethodPatch, item, `{"Meta": {"a": null, "c": "3"}, "Params": {"x": {"z": null}}, "Stage": "hello"}`, http.StatusOK).json(t)
	want := copyMap(m)
	want["Meta"] = map[string]any{"b": "2", "c": "3"}
	want["Params"] = map[string]any{"x": map[string]any{"y": 1.0}}
	want["Stage"] = "hello"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PATCH = %v, want %v", got, want)
	}
	// Addressing by Field:value works for PATCH too.
	got = e.mustDo(api.RoleOperator, http.MethodPatch, "/api/v1/machines/Name:birdy", `{"Description": null}`, http.StatusOK).json(t)
	if got["Description"] != "" || got["Stage"] != "hello" {
		t.Errorf("PATCH by Name:birdy = %v, want Description cleared and Stage kept", got)
	}
}

// TestJobTimestampsRoundTrip checks that job times keep nanoseconds and offset through the API.
func TestJobTimestampsRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.fixtures()
	const start, end = "2022-09-15T15:22:35.937594733-04:00", "2022-09-15T15:22:35.937596048-04:00"
	j := e.create(api.KindJobs, map[string]any{"Machine": f.machine, "StartTime": start, "EndTime": end, "State": api.JobFinished})
	got := e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/jobs/"+j["Uuid"].(string), nil, http.StatusOK).json(t)
	if got["StartTime"] != start || got["EndTime"] != end {
		t.Errorf("times = %v, %v, want %s, %s", got["StartTime"], got["EndTime"], start, end)
	}
	if got["Previous"] != api.NilUUID {
		t.Errorf("Previous = %v, want the nil UUID", got["Previous"])
	}
}

func TestListOffsetLimitAndEmpty(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if body := strings.TrimSpace(string(e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/profiles", nil, http.StatusOK).body)); body != "[]" {
		t.Errorf("empty list = %s, want []", body)
	}
	for _, name := range []string{"p1", "p2", "p3", "p4"} {
		e.create(api.KindProfiles, map[string]any{"Name": name})
	}
	page := e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/profiles?offset=1&limit=2", nil, http.StatusOK).list(t)
	if len(page) != 2 || page[0]["Name"] != "p2" || page[1]["Name"] != "p3" {
		t.Errorf("offset=1&limit=2 = %v, want p2, p3", page)
	}
}

func TestJobLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.fixtures()
	j := e.create(api.KindJobs, map[string]any{"Machine": f.machine, "StartTime": time.Now().Format(time.RFC3339Nano)})
	logPath := "/api/v1/jobs/" + j["Uuid"].(string) + "/log"
	e.mustDo(api.RoleOperator, http.MethodPut, logPath, "line 1\n", http.StatusNoContent)
	e.mustDo(api.RoleOperator, http.MethodPut, logPath, "line 2 ✓\n", http.StatusNoContent)
	r := e.mustDo(api.RoleReadonly, http.MethodGet, logPath, nil, http.StatusOK)
	if string(r.body) != "line 1\nline 2 ✓\n" {
		t.Errorf("log = %q", r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	e.do(api.RoleAdmin, http.MethodGet, "/api/v1/jobs/"+api.NilUUID+"/log", nil).apiError(t, http.StatusNotFound)
	e.do(api.RoleAdmin, http.MethodPut, "/api/v1/jobs/"+api.NilUUID+"/log", "x").apiError(t, http.StatusNotFound)
}

func TestMintToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(api.KindUsers, map[string]any{"Name": "bob", "Role": api.RoleOperator})
	tok := e.mustDo(api.RoleAdmin, http.MethodPost, "/api/v1/users/bob/token", map[string]any{"Role": api.RoleReadonly, "TTL": int64(time.Hour)}, http.StatusCreated).json(t)
	if tok["User"] != "bob" || tok["Role"] != api.RoleReadonly || tok["Token"] == "" {
		t.Fatalf("token = %v", tok)
	}
	if exp, _ := time.Parse(time.RFC3339Nano, tok["Expires"].(string)); time.Until(exp) < 50*time.Minute || time.Until(exp) > 70*time.Minute {
		t.Errorf("Expires = %v, want in about an hour", tok["Expires"])
	}
	e.tokens["bob"] = tok["Token"].(string)
	e.mustDo("bob", http.MethodGet, "/api/v1/machines", nil, http.StatusOK)
	if msg := e.do("bob", http.MethodPost, "/api/v1/pools", map[string]any{"Name": "x"}).apiError(t, http.StatusForbidden); !strings.Contains(msg, "readonly") {
		t.Errorf("403 message %q does not name the role", msg)
	}
	// No body: the user's own role.
	tok = e.mustDo(api.RoleAdmin, http.MethodPost, "/api/v1/users/bob/token", nil, http.StatusCreated).json(t)
	if tok["Role"] != api.RoleOperator {
		t.Errorf("default token role = %v, want operator", tok["Role"])
	}
	e.do(api.RoleAdmin, http.MethodPost, "/api/v1/users/bob/token", map[string]any{"Role": api.RoleAdmin}).apiError(t, http.StatusUnprocessableEntity)
	e.do(api.RoleAdmin, http.MethodPost, "/api/v1/users/nobody/token", nil).apiError(t, http.StatusNotFound)
}

func TestEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(api.KindPools, map[string]any{"Name": "gold"})
	e.mustDo(api.RoleOperator, http.MethodPatch, "/api/v1/pools/gold", `{"Description": "shiny"}`, http.StatusOK)
	events := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/events?Kind=pools&Key=gold", nil, http.StatusOK).list(t)
	if len(events) != 2 {
		t.Fatalf("events = %v, want 2", events)
	}
	if events[0]["Actor"] != "operator-user" || events[1]["Actor"] != "admin" || events[1]["Action"] != "create" {
		t.Errorf("events (newest first) = %v, want an update by operator-user then a create by admin", events)
	}
	only := e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/events?Kind=pools&Key=gold&limit=1", nil, http.StatusOK).list(t)
	if len(only) != 1 || only[0]["ID"] != events[0]["ID"] {
		t.Errorf("limit=1 = %v, want the newest event", only)
	}
}

// jsonValue is v as it reads back from JSON.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func copyMap(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// TestMachineAddressTaken: an operator cannot give two machines one address, by create, PUT
// or PATCH: 409 naming the machine that holds it, and nothing changes.
func TestMachineAddressTaken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	holder := e.create(api.KindMachines, map[string]any{"Name": "holder", "Address": "10.3.0.5"})
	other := e.create(api.KindMachines, map[string]any{"Name": "other", "Address": "10.3.0.6"})
	path := "/api/v1/machines/" + other["Uuid"].(string)
	held := "machine holder (" + holder["Uuid"].(string) + ")"
	readdressed := maps.Clone(other)
	readdressed["Address"] = "10.3.0.5"
	for _, c := range []struct {
		name, method, path string
		body               any
	}{
		{"create", http.MethodPost, "/api/v1/machines", map[string]any{"Name": "dup", "Address": "10.3.0.5"}},
		{"put", http.MethodPut, path, readdressed},
		{"patch", http.MethodPatch, path, map[string]any{"Address": "10.3.0.5"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if msg := e.do(api.RoleOperator, c.method, c.path, c.body).apiError(t, http.StatusConflict); !strings.Contains(msg, held) {
				t.Errorf("refusal %q does not name %s", msg, held)
			}
		})
	}
	if got := e.mustDo(api.RoleReadonly, http.MethodGet, path, nil, http.StatusOK).json(t); got["Address"] != "10.3.0.6" {
		t.Errorf("other after refused writes: Address %v", got["Address"])
	}
	e.do(api.RoleReadonly, http.MethodGet, "/api/v1/machines/Name:dup", nil).apiError(t, http.StatusNotFound)
}
