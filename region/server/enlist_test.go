package server_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// POST /api/v1/enlist: racks (for the machines booting through them), operators and admins;
// a rack's report names that rack whatever its body says; bad bodies change nothing.
func TestEnlistRoute(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rack, tok, err := e.st.RegisterRack(ctx, api.RackRegistration{Name: "rack-1"}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	report := api.Enlistment{Boot: &api.BootFacts{MAC: "52:54:00:0e:00:01", BuildArch: "arm64", Platform: "efi",
		Rack: "aaaaaaaa-0000-4000-8000-00000000dead"}}

	e.do(api.RoleReadonly, http.MethodPost, "/api/v1/enlist", report).apiError(t, http.StatusForbidden)
	e.do("", http.MethodPost, "/api/v1/enlist", report).apiError(t, http.StatusUnauthorized)
	e.do(api.RoleOperator, http.MethodPost, "/api/v1/enlist", `{"Boot": {"MAC": "52:54:00:0e:00:01", "Color": "red"}}`).apiError(t, http.StatusBadRequest)
	e.do(api.RoleOperator, http.MethodPost, "/api/v1/enlist", `{"Boot": {"MAC": "52:54:00:0e:00:01", "Serial": "a\u0000b"}}`).apiError(t, http.StatusBadRequest)
	if ms := e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/machines", nil, http.StatusOK).list(t); len(ms) != 0 {
		t.Fatalf("refused reports created %d machines", len(ms))
	}

	created := doRequest(t, tok.Token, http.MethodPost, e.base+"/api/v1/enlist", report)
	if created.code != http.StatusCreated {
		t.Fatalf("first report: %d %s", created.code, created.body)
	}
	res := created.json(t)
	again := doRequest(t, tok.Token, http.MethodPost, e.base+"/api/v1/enlist", report)
	if again.code != http.StatusOK || again.json(t)["Machine"] != res["Machine"] || again.json(t)["Created"] != false {
		t.Fatalf("second report: %d %s", again.code, again.body)
	}
	m := e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/machines/"+res["Machine"].(string), nil, http.StatusOK).json(t)
	boot := m["Enlisted"].(map[string]any)["Boot"].(map[string]any)
	if boot["Rack"] != rack.Uuid || m["Rack"] != rack.Uuid || m["Arch"] != "arm64" || m["Status"] != api.StatusNew {
		t.Fatalf("enlisted machine %v: want Rack %s, Arch arm64, Status New", m, rack.Uuid)
	}
	machine := e.machineToken(res["Machine"].(string))
	doRequest(t, machine, http.MethodPost, e.base+"/api/v1/enlist", report).apiError(t, http.StatusForbidden)
}
