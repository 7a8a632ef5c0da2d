package activities_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/region/api"
)

// listRegion serves the machine list and machine lookups of a region API over HTTP, with
// exact-match Pool and Rack filters, and records the queries it was sent; and the job list,
// with an exact-match State filter, of the jobs jobs answers for the nth job list.
type listRegion struct {
	machines []api.Machine
	jobs     func(n int) []api.Job
	mu       sync.Mutex
	queries  []string
	jobLists int
}

func (r *listRegion) serve(t *testing.T) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/machines", func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.queries = append(r.queries, req.URL.RawQuery)
		r.mu.Unlock()
		q := req.URL.Query()
		var out []api.Machine
		for _, m := range r.machines {
			if (!q.Has("Pool") || m.Pool == q.Get("Pool")) && (!q.Has("Rack") || m.Rack == q.Get("Rack")) {
				out = append(out, m)
			}
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /api/v1/jobs", func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.jobLists++
		n := r.jobLists
		r.mu.Unlock()
		out := []api.Job{}
		for _, j := range r.jobs(n) {
			if !req.URL.Query().Has("State") || j.State == req.URL.Query().Get("State") {
				out = append(out, j)
			}
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /api/v1/machines/{key}", func(w http.ResponseWriter, req *http.Request) {
		for _, m := range r.machines {
			if "Name:"+m.Name == req.PathValue("key") {
				_ = json.NewEncoder(w).Encode(m)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(api.Error{Error: "machines " + req.PathValue("key") + " not found", Code: http.StatusNotFound})
	})
	// The source grants the bulk migration to west with the grant "bulk-grant" only.
	mux.HandleFunc("POST /api/v1/migrate-grants/verify", func(w http.ResponseWriter, req *http.Request) {
		var check api.GrantCheck
		if err := json.NewDecoder(req.Body).Decode(&check); err != nil || check.Grant != "bulk-grant" || check.Kind != api.GrantBulk || check.TargetRegion != "west" {
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "grant refused", Code: http.StatusForbidden})
			return
		}
		_ = json.NewEncoder(w).Encode(api.GrantClaims{Kind: api.GrantBulk, TargetRegion: "west", GrantedTo: "op"})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestSelectMachines(t *testing.T) {
	stub := api.Machine{Uuid: "u-0", Name: "old", Pool: "gold", Rack: "r1", Meta: map[string]string{api.MetaRedirectEndpoint: "https://west.example:5240"}}
	region := &listRegion{machines: []api.Machine{
		{Uuid: "u-3", Name: "c", Pool: "gold", Rack: "r1"},
		{Uuid: "u-1", Name: "a", Pool: "gold", Rack: "r2"},
		{Uuid: "u-2", Name: "b", Pool: "silver", Rack: "r1"},
		stub,
	}}
	url := region.serve(t)
	regions, err := activities.NewRegions(map[string]activities.RegionConfig{"east": {URL: url, Token: "t"}}, activities.DialClient)
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&activities.Activities{Regions: regions})

	tests := []struct {
		name      string
		region    string
		selector  activities.Selector
		want      []string
		wantQuery string // the list query sent, "" when none
		wantType  string // application error type, "" for success
		wantMsg   string
	}{
		{"pool, sorted, stub left out", "east", activities.Selector{Pool: "gold"}, []string{"u-1", "u-3"}, "Pool=gold", "", ""},
		{"rack", "east", activities.Selector{Rack: "r1"}, []string{"u-2", "u-3"}, "Rack=r1", "", ""},
		{"pool and rack", "east", activities.Selector{Pool: "gold", Rack: "r1"}, []string{"u-3"}, "Pool=gold&Rack=r1", "", ""},
		{"names, duplicates once", "east", activities.Selector{Names: []string{"c", "a", "c"}}, []string{"u-1", "u-3"}, "", "", ""},
		{"nothing selected", "east", activities.Selector{Pool: "bronze"}, []string{}, "Pool=bronze", "", ""},
		{"empty selector", "east", activities.Selector{}, nil, "", activities.ErrTypeInvalidSelector, "selector is empty"},
		{"names and pool", "east", activities.Selector{Pool: "gold", Names: []string{"a"}}, nil, "", activities.ErrTypeInvalidSelector, "mixes machine names"},
		{"unknown names", "east", activities.Selector{Names: []string{"a", "zz", "yy"}}, nil, "", activities.ErrTypeMachineNotFound, "machines not found on region east: zz, yy"},
		{"unknown region", "north", activities.Selector{Pool: "gold"}, nil, "", activities.ErrTypeUnknownRegion, "north"},
		{"no grant", "east", activities.Selector{Pool: "gold"}, nil, "", activities.ErrGrantRefused, "region east refused the grant to move bulk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			region.mu.Lock()
			region.queries = nil
			region.mu.Unlock()
			v, err := env.ExecuteActivity(a.SelectMachines, activities.SelectInput{Region: tt.region, Selector: tt.selector, TargetRegion: "west", Grant: grantOf(tt.wantType)})
			if tt.wantType != "" {
				var appErr *temporal.ApplicationError
				if !errors.As(err, &appErr) || appErr.Type() != tt.wantType || !appErr.NonRetryable() || !strings.Contains(appErr.Error(), tt.wantMsg) {
					t.Fatalf("got %v, want a non-retryable %s error containing %q", err, tt.wantType, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if err := v.Get(&got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("selected %v, want %v", got, tt.want)
			}
			region.mu.Lock()
			queries := region.queries
			region.mu.Unlock()
			if tt.wantQuery != "" && !slices.Equal(queries, []string{tt.wantQuery}) {
				t.Errorf("list queries %q, want %q", queries, tt.wantQuery)
			}
		})
	}
}

func TestSelectorString(t *testing.T) {
	tests := []struct {
		s    activities.Selector
		want string
	}{
		{activities.Selector{Pool: "gold"}, "pool gold"},
		{activities.Selector{Pool: "gold", Rack: "r1"}, "pool gold and rack r1"},
		{activities.Selector{Names: []string{"a", "b"}}, "names a,b"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.s, got, tt.want)
		}
	}
}

// grantOf is the grant a SelectMachines case sends: none for the case that checks its refusal.
func grantOf(wantType string) string {
	if wantType == activities.ErrGrantRefused {
		return ""
	}
	return "bulk-grant"
}

// A selection read a page at a time: pool pages in UUID order after the cursor, as the region
// lists them at each page (a machine migrated meanwhile is a stub and not listed again);
// names pages in name order, the first checking every name, a later one reporting a name no
// machine has any more; only the first page verifies the grant.
func TestSelectMachinesPage(t *testing.T) {
	region := &listRegion{machines: []api.Machine{
		{Uuid: "u-4", Name: "d", Pool: "gold"},
		{Uuid: "u-1", Name: "c", Pool: "gold"},
		{Uuid: "u-3", Name: "a", Pool: "gold"},
		{Uuid: "u-2", Name: "b", Pool: "silver"},
		{Uuid: "u-5", Name: "e", Pool: "gold"},
	}}
	regions, err := activities.NewRegions(map[string]activities.RegionConfig{"east": {URL: region.serve(t), Token: "t"}}, activities.DialClient)
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&activities.Activities{Regions: regions})
	page := func(sel activities.Selector, grant, after string, limit int) (activities.SelectPage, error) {
		t.Helper()
		in := activities.SelectPageInput{SelectInput: activities.SelectInput{Region: "east", Selector: sel, TargetRegion: "west", Grant: grant}, After: after, Limit: limit}
		v, err := env.ExecuteActivity(a.SelectMachinesPage, in)
		var p activities.SelectPage
		if err == nil {
			err = v.Get(&p)
		}
		return p, err
	}
	check := func(what string, got activities.SelectPage, err error, want activities.SelectPage) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !slices.Equal(got.Machines, want.Machines) || !slices.Equal(got.NotFound, want.NotFound) || got.Last != want.Last || got.Left != want.Left {
			t.Errorf("%s: got %+v, want %+v", what, got, want)
		}
	}
	gold := activities.Selector{Pool: "gold"}
	p, err := page(gold, "bulk-grant", "", 2)
	check("first pool page", p, err, activities.SelectPage{Machines: []string{"u-1", "u-3"}, Last: "u-3", Left: 4})
	region.machines[0].Meta = map[string]string{api.MetaRedirectEndpoint: "https://west.example:5240"} // u-4 migrated meanwhile
	p, err = page(gold, "", p.Last, 2)
	check("second pool page, without a grant", p, err, activities.SelectPage{Machines: []string{"u-5"}, Last: "u-5", Left: 1})
	p, err = page(gold, "", p.Last, 2)
	check("after the last", p, err, activities.SelectPage{Left: 0})

	names := activities.Selector{Names: []string{"e", "a", "c", "a"}}
	p, err = page(names, "bulk-grant", "", 2)
	check("first names page", p, err, activities.SelectPage{Machines: []string{"u-3", "u-1"}, Last: "c", Left: 3})
	region.machines = slices.DeleteFunc(region.machines, func(m api.Machine) bool { return m.Name == "e" })
	p, err = page(names, "", p.Last, 2)
	check("second names page, e deleted meanwhile", p, err, activities.SelectPage{NotFound: []string{"e"}, Last: "e", Left: 1})

	var appErr *temporal.ApplicationError
	if _, err := page(activities.Selector{Names: []string{"a", "zz"}}, "bulk-grant", "", 1); !errors.As(err, &appErr) || appErr.Type() != activities.ErrTypeMachineNotFound {
		t.Errorf("first page naming a missing machine: got %v, want %s", err, activities.ErrTypeMachineNotFound)
	}
	if _, err := page(gold, "", "", 2); !errors.As(err, &appErr) || appErr.Type() != activities.ErrGrantRefused {
		t.Errorf("first page without a grant: got %v, want %s", err, activities.ErrGrantRefused)
	}
	for _, limit := range []int{0, activities.MaxSelectPage + 1} {
		if _, err := page(gold, "bulk-grant", "", limit); !errors.As(err, &appErr) || appErr.Type() != activities.ErrTypeInvalidSelector || !appErr.NonRetryable() {
			t.Errorf("limit %d: got %v, want a non-retryable %s", limit, err, activities.ErrTypeInvalidSelector)
		}
	}
}
