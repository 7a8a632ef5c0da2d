package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/rack"
	"github.com/ironflow/ironflow/region/api"
)

// fakeRackRegion accepts registrations with secret "s3cret" and records them.
func fakeRackRegion(t *testing.T) (*httptest.Server, *[]api.RackRegistration) {
	t.Helper()
	var seen []api.RackRegistration
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/racks/register" || r.Header.Get("Authorization") != "Bearer s3cret" {
			answer(w, http.StatusUnauthorized, api.Error{Error: "wrong rack secret", Code: http.StatusUnauthorized})
			return
		}
		var reg api.RackRegistration
		if err := json.NewDecoder(r.Body).Decode(&reg); err != nil {
			t.Error(err)
		}
		seen = append(seen, reg)
		answer(w, http.StatusOK, api.RackRegistered{
			Rack:   api.Rack{Uuid: "0d000000-0000-4000-8000-000000000001", Name: reg.Name},
			Token:  "rack-token",
			Region: api.Info{Name: "region-a"},
		})
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func TestRackRegister(t *testing.T) {
	region, seen := fakeRackRegion(t)
	dir := t.TempDir()
	code, out, errOut := ironflow(t, "", "rack", "register", "--url", "http://127.0.0.1:1", "--url", region.URL,
		"--secret", "s3cret", "--name", "rack-1", "--state-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "0d000000-0000-4000-8000-000000000001") || !strings.Contains(out, "region-a") {
		t.Errorf("output %q names neither the rack nor the region", out)
	}
	st, err := rack.LoadState(dir)
	if err != nil || st.Token != "rack-token" || len(st.Endpoints) != 2 || st.Endpoints[1] != region.URL {
		t.Fatalf("stored %+v, %v", st, err)
	}
	if len(*seen) != 1 || (*seen)[0].Name != "rack-1" || (*seen)[0].Version != version {
		t.Errorf("region saw %+v", *seen)
	}

	// The environment stands in for flags; a wrong secret fails and keeps the registration.
	t.Setenv("IRONFLOW_RACK_URLS", region.URL+", "+region.URL)
	t.Setenv("IRONFLOW_RACK_SECRET", "wrong")
	t.Setenv("IRONFLOW_RACK_STATE_DIR", dir)
	code, _, errOut = ironflow(t, "", "rack", "register")
	if code == 0 || !strings.Contains(errOut, "wrong rack secret") {
		t.Fatalf("wrong secret: exit %d: %s", code, errOut)
	}
	if again, _ := rack.LoadState(dir); again.Token != "rack-token" {
		t.Fatalf("a refused registration changed the state: %+v", again)
	}
}

func TestRackServeRefusesBadInput(t *testing.T) {
	secrets := filepath.Join(t.TempDir(), "secrets.yaml")
	if err := os.WriteFile(secrets, []byte("secrets:\n  region-b: \"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"not registered", []string{"--state-dir", t.TempDir(), "--tftp-listen", "", "--http-listen", ""}, "not registered"},
		{"bad server IP", []string{"--server-ip", "rack-1"}, "not an IPv4 address"},
		{"bad syslog address", []string{"--state-dir", t.TempDir(), "--syslog-listen", "rack-1"}, "syslog listen address"},
		{"empty secret", []string{"--region-secrets-file", secrets}, "needs a name and a secret"},
		{"unknown secrets field", []string{"--region-secrets-file", writeRegionsFile(t, "regions: {}\n")}, "unknown field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := ironflow(t, "", append([]string{"rack", "serve"}, c.args...)...)
			if code == 0 || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d, stderr %q; want an error mentioning %q", code, errOut, c.want)
			}
		})
	}
}
