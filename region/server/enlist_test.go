package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/server"
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

// Over a caller's rate of reports, or at the cap of New machines, a report is answered 503
// with Retry-After, creates nothing, and /metrics counts it by limit; each caller has its
// own budget, and reports of known machines pass the cap.
func TestEnlistRouteLimits(t *testing.T) {
	e := newEnv(t)
	base := startServer(t, e.st, "limited", func(c *server.Config) {
		c.Enlist = server.EnlistLimits{PerRack: 0.001, PerRackBurst: 4, MaxNew: 2}
	})
	report := func(token, mac string) response {
		return doRequest(t, token, http.MethodPost, base+"/api/v1/enlist", api.Enlistment{Boot: &api.BootFacts{MAC: mac}})
	}
	retryLater := func(r response, want string) {
		t.Helper()
		if msg := r.apiError(t, http.StatusServiceUnavailable); !strings.Contains(msg, want) || r.header.Get("Retry-After") == "" {
			t.Fatalf("answer %q, Retry-After %q; want it to mention %q, with Retry-After", msg, r.header.Get("Retry-After"), want)
		}
	}
	rack := e.tokens[api.RoleRack]
	for _, mac := range []string{"52:54:00:0d:00:01", "52:54:00:0d:00:02"} {
		if r := report(rack, mac); r.code != http.StatusCreated {
			t.Fatalf("report of %s: %d %s", mac, r.code, r.body)
		}
	}
	retryLater(report(rack, "52:54:00:0d:00:03"), "holds 2 New machines")
	if r := report(rack, "52:54:00:0d:00:01"); r.code != http.StatusOK {
		t.Fatalf("a known machine's report at the cap: %d %s", r.code, r.body)
	}
	retryLater(report(rack, "52:54:00:0d:00:01"), "sends more reports than the region takes")
	retryLater(report(e.tokens[api.RoleOperator], "52:54:00:0d:00:04"), "holds 2 New machines")

	if ms := e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/machines", nil, http.StatusOK).list(t); len(ms) != 2 {
		t.Fatalf("%d machines, want the 2 of the cap", len(ms))
	}
	metrics := string(doRequest(t, "", http.MethodGet, base+"/metrics", nil).body)
	for _, want := range []string{`ironflow_enlist_limited_total{limit="new-machines"} 2`, `ironflow_enlist_limited_total{limit="rack"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
