package server_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// TestInfoListsEveryProcess runs two server processes on one database: both report the same
// region UUID and list each other (each heartbeats at start), and an object written through
// one is read through the other.
func TestInfoListsEveryProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	second := startServer(t, e.st, "test-region")
	var infos []api.Info
	for _, base := range []string{e.base, second} {
		r := doRequest(t, "", http.MethodGet, base+"/api/v1/info", nil)
		if r.code != http.StatusOK {
			t.Fatalf("info: %d %s", r.code, r.body)
		}
		var info api.Info
		if err := json.Unmarshal(r.body, &info); err != nil {
			t.Fatal(err)
		}
		if info.URL != base || info.Name != "test-region" || info.Version != "test-1" || info.Uuid == "" {
			t.Errorf("info of %s = %+v", base, info)
		}
		want := []string{e.base, second}
		slices.Sort(want)
		if !reflect.DeepEqual(info.Endpoints, want) {
			t.Errorf("Endpoints = %v, want %v", info.Endpoints, want)
		}
		infos = append(infos, info)
	}
	if infos[0].Uuid != infos[1].Uuid {
		t.Errorf("the processes report different region UUIDs %s and %s", infos[0].Uuid, infos[1].Uuid)
	}
	e.create(api.KindPools, map[string]any{"Name": "shared"})
	if r := doRequest(t, e.tokens[api.RoleReadonly], http.MethodGet, second+"/api/v1/pools/shared", nil); r.code != http.StatusOK {
		t.Errorf("pool created on one process, GET on the other: %d %s", r.code, r.body)
	}
}

func TestHealthzAndMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.mustDo("", http.MethodGet, "/healthz", nil, http.StatusOK); string(r.body) != "ok\n" {
		t.Errorf("healthz body %q", r.body)
	}
	e.create(api.KindPools, map[string]any{"Name": "gold"})
	e.do(api.RoleReadonly, http.MethodGet, "/api/v1/pools/nothere", nil)
	e.do(api.RoleAdmin, http.MethodGet, "/no/such/path/1", nil)
	e.do(api.RoleAdmin, http.MethodGet, "/no/such/path/2", nil)
	metrics := string(e.mustDo("", http.MethodGet, "/metrics", nil, http.StatusOK).body)
	for _, want := range []string{
		`ironflow_region_http_requests_total{code="201",method="POST",route="/api/v1/pools"} 1`,
		`ironflow_region_http_requests_total{code="404",method="GET",route="/api/v1/pools/{key}"} 1`,
		`ironflow_region_http_requests_total{code="404",method="GET",route="unmatched"} 2`,
		`ironflow_region_http_requests_total{code="200",method="GET",route="/healthz"} 1`,
		`ironflow_region_http_request_duration_seconds_count{method="POST",route="/api/v1/pools"} 1`,
		`ironflow_region_http_request_duration_seconds_bucket{method="POST",route="/api/v1/pools",le="+Inf"} 1`,
		"go_goroutines",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(metrics, "/no/such/path") {
		t.Error("an unmatched path became a label value")
	}
}
