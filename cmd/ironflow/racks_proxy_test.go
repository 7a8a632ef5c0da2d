package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// TestRacksProxySetChangesOnlyTheFlagsGiven: `racks proxy set` keeps what its flags do not
// name, and the table shows the defaults by name.
func TestRacksProxySetChangesOnlyTheFlagsGiven(t *testing.T) {
	current := api.RackProxy{Parent: "http://squid:3128", ConnectPorts: []int{443}, CacheBytes: 5 << 30}
	var put []api.RackProxy
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.ProxyPath {
			http.NotFound(w, r)
			return
		}
		if r.Method == http.MethodPut {
			var p api.RackProxy
			if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
				answer(w, http.StatusBadRequest, api.Error{Error: err.Error(), Code: 400})
				return
			}
			put = append(put, p)
			current = p
		}
		answer(w, http.StatusOK, current)
	}))
	defer srv.Close()
	cli := func(args ...string) string {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append([]string{"-E", srv.URL}, args...), strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		return out.String()
	}
	cli("racks", "proxy", "set", "--connect-port", "443,8443", "--enabled=false")
	if len(put) != 1 || put[0].Parent != "http://squid:3128" || !slices.Equal(put[0].ConnectPorts, []int{443, 8443}) || put[0].CacheBytes != 5<<30 || !put[0].Disabled {
		t.Fatalf("sent %+v", put)
	}
	cli("racks", "proxy", "set", "--parent", "", "--cache-bytes", "0", "--enabled")
	out := cli("racks", "proxy", "show", "-o", "table")
	for _, want := range []string{"true", "direct", "[443 8443]", "(default)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table has no %q:\n%s", want, out)
		}
	}
}
