package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

func TestUnauthenticated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct{ name, header string }{
		{"no header", ""},
		{"basic auth", "Basic YWRtaW46YWRtaW4="},
		{"empty bearer", "Bearer "},
		{"unknown token", "Bearer not-a-token"},
		{"token without scheme", e.tokens[api.RoleAdmin]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, e.base+"/api/v1/machines", nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.header != "" {
				req.Header.Set("Authorization", c.header)
			}
			r := send(t, req)
			r.apiError(t, http.StatusUnauthorized)
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q", r.header.Get("WWW-Authenticate"))
			}
		})
	}
	for _, path := range []string{"/healthz", "/metrics", "/api/v1/info"} {
		e.mustDo("", http.MethodGet, path, nil, http.StatusOK)
	}
	// The scheme is case-insensitive (RFC 7235).
	req, err := http.NewRequest(http.MethodGet, e.base+"/api/v1/machines", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "bearer "+e.tokens[api.RoleAdmin])
	if r := send(t, req); r.code != http.StatusOK {
		t.Errorf("lower-case scheme: %d %s", r.code, r.body)
	}
}

// TestRolePermissions runs a table of requests as every role. A machine token belongs to
// machine "mine"; "other" is another machine. Writes that pass the permission check but
// address a missing object answer 404, which shows the check let them through.
func TestRolePermissions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.fixtures()
	mine := e.create(api.KindMachines, map[string]any{"Name": "mine"})["Uuid"].(string)
	other := f.machine
	now := time.Now().Format(time.RFC3339Nano)
	myJob := e.create(api.KindJobs, map[string]any{"Machine": mine, "StartTime": now})["Uuid"].(string)
	otherJob := e.create(api.KindJobs, map[string]any{"Machine": other, "StartTime": now})["Uuid"].(string)
	e.tokens[api.RoleMachine] = e.machineToken(mine)
	e.create(api.KindUsers, map[string]any{"Name": "bob", "Role": api.RoleReadonly})

	const (
		ok, created, none, forbid, missing = 200, 201, 204, 403, 404
	)
	roles := []string{api.RoleAdmin, api.RoleOperator, api.RoleReadonly, api.RoleRack, api.RoleMachine}
	cases := []struct {
		method, path string
		body         func(role string) any
		want         [5]int // admin, operator, readonly, rack, machine
	}{
		{"GET", "/api/v1/machines", nil, [5]int{ok, ok, ok, ok, forbid}},
		{"GET", "/api/v1/machines?Uuid=" + mine, nil, [5]int{ok, ok, ok, ok, ok}},
		{"GET", "/api/v1/machines?Uuid=" + other, nil, [5]int{ok, ok, ok, ok, forbid}},
		{"GET", "/api/v1/machines/" + mine, nil, [5]int{ok, ok, ok, ok, ok}},
		{"GET", "/api/v1/machines/Name:mine", nil, [5]int{ok, ok, ok, ok, ok}},
		{"GET", "/api/v1/machines/" + other, nil, [5]int{ok, ok, ok, ok, forbid}},
		{"POST", "/api/v1/machines", func(role string) any { return map[string]any{"Name": "new-" + role} }, [5]int{created, created, forbid, forbid, forbid}},
		{"PATCH", "/api/v1/machines/" + mine, func(string) any { return map[string]any{"Description": "x"} }, [5]int{ok, ok, forbid, forbid, forbid}},
		{"DELETE", "/api/v1/machines/" + api.NilUUID, nil, [5]int{missing, missing, forbid, forbid, forbid}},
		{"GET", "/api/v1/jobs?Machine=" + mine, nil, [5]int{ok, ok, ok, ok, ok}},
		{"GET", "/api/v1/jobs?Machine=" + other, nil, [5]int{ok, ok, ok, ok, forbid}},
		{"GET", "/api/v1/jobs", nil, [5]int{ok, ok, ok, ok, forbid}},
		{"GET", "/api/v1/jobs/" + myJob, nil, [5]int{ok, ok, ok, ok, ok}},
		{"GET", "/api/v1/jobs/" + otherJob, nil, [5]int{ok, ok, ok, ok, forbid}},
		{"PATCH", "/api/v1/jobs/" + myJob, func(string) any { return map[string]any{"State": api.JobRunning} }, [5]int{ok, ok, forbid, forbid, forbid}},
		{"GET", "/api/v1/jobs/" + myJob + "/log", nil, [5]int{ok, ok, ok, ok, ok}},
		{"GET", "/api/v1/jobs/" + otherJob + "/log", nil, [5]int{ok, ok, ok, ok, forbid}},
		{"PUT", "/api/v1/jobs/" + myJob + "/log", func(role string) any { return role + "\n" }, [5]int{none, none, forbid, forbid, none}},
		{"PUT", "/api/v1/jobs/" + otherJob + "/log", func(role string) any { return role + "\n" }, [5]int{none, none, forbid, forbid, forbid}},
		{"GET", "/api/v1/profiles", nil, [5]int{ok, ok, ok, ok, forbid}},
		{"POST", "/api/v1/move-controls", func(role string) any {
			return api.MoveControl{Migration: "bulk-migrate/" + role, Action: "pause", By: role}
		}, [5]int{none, none, forbid, forbid, forbid}},
		{"POST", "/api/v1/profiles", func(role string) any { return map[string]any{"Name": "p-" + role} }, [5]int{created, created, forbid, forbid, forbid}},
		{"DELETE", "/api/v1/pools/nothere", nil, [5]int{missing, missing, forbid, forbid, forbid}},
		{"GET", "/api/v1/subnets/" + f.subnet, nil, [5]int{ok, ok, ok, ok, forbid}},
		{"PUT", "/api/v1/subnets/" + api.NilUUID, func(string) any { return map[string]any{"Name": "x"} }, [5]int{missing, missing, forbid, forbid, forbid}},
		{"POST", "/api/v1/racks", func(role string) any { return map[string]any{"Name": "rack-" + role} }, [5]int{created, created, forbid, forbid, forbid}},
		{"PATCH", "/api/v1/racks/" + f.rack, func(string) any { return map[string]any{"Status": api.RackOnline} }, [5]int{ok, ok, forbid, forbid, forbid}},
		{"GET", "/api/v1/leases", nil, [5]int{ok, ok, ok, ok, forbid}},
		{"POST", "/api/v1/leases", func(role string) any {
			return map[string]any{"Addr": fmt.Sprintf("10.0.0.%d", 10+len(role)), "MAC": "52:54:00:00:01:0" + fmt.Sprint(len(role)%10), "Subnet": f.subnet, "State": "active"}
		}, [5]int{created, created, forbid, forbid, forbid}},
		{"GET", "/api/v1/users", nil, [5]int{ok, forbid, forbid, forbid, forbid}},
		{"GET", "/api/v1/users/bob", nil, [5]int{ok, forbid, forbid, forbid, forbid}},
		{"POST", "/api/v1/users", func(role string) any { return map[string]any{"Name": "u-" + role, "Role": api.RoleReadonly} }, [5]int{created, forbid, forbid, forbid, forbid}},
		{"POST", "/api/v1/users/bob/token", nil, [5]int{created, forbid, forbid, forbid, forbid}},
		{"GET", "/api/v1/events", nil, [5]int{ok, ok, ok, ok, forbid}},
		{"GET", "/api/v1/info", nil, [5]int{ok, ok, ok, ok, ok}},
	}
	for _, c := range cases {
		for i, role := range roles {
			t.Run(fmt.Sprintf("%s %s as %s", c.method, c.path, role), func(t *testing.T) {
				var body any
				if c.body != nil {
					body = c.body(role)
				}
				r := e.do(role, c.method, c.path, body)
				if r.code != c.want[i] {
					t.Fatalf("status %d, want %d: %s", r.code, c.want[i], r.body)
				}
				if r.code == forbid {
					if msg := r.apiError(t, forbid); !strings.Contains(msg, fmt.Sprintf("%q", role)) {
						t.Errorf("403 message %q does not name role %s", msg, role)
					}
				}
			})
		}
	}
	// A machine's log writes are its own; others' were refused.
	log := e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/jobs/"+myJob+"/log", nil, http.StatusOK).body
	if string(log) != "admin\noperator\nmachine\n" {
		t.Errorf("log of my job = %q", log)
	}
}

// TestMachineSecretOnlyForAdminsAndOperators: Machine.Secret is the agent's credential, so
// read-only and rack callers see the machine without it.
func TestMachineSecretOnlyForAdminsAndOperators(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(api.KindMachines, api.Machine{Name: "birdy", Secret: "h5kYqfCu6ehiAVz0"})
	for _, c := range []struct {
		role string
		want string
	}{
		{api.RoleAdmin, "h5kYqfCu6ehiAVz0"},
		{api.RoleOperator, "h5kYqfCu6ehiAVz0"},
		{api.RoleReadonly, ""},
		{api.RoleRack, ""},
	} {
		shown := e.mustDo(c.role, http.MethodGet, "/api/v1/machines/Name:birdy", nil, http.StatusOK).json(t)
		listed := e.mustDo(c.role, http.MethodGet, "/api/v1/machines", nil, http.StatusOK).list(t)
		if shown["Secret"] != c.want || len(listed) != 1 || listed[0]["Secret"] != c.want {
			t.Errorf("%s sees Secret %q in show and %v in list, want %q", c.role, shown["Secret"], listed, c.want)
		}
	}
}
