package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// authRegion answers like a region that wants the token "good": a region error document
// for a missing or unknown token, and its info (which needs no token).
func authRegion(t *testing.T) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/info", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, http.StatusOK, api.Info{Name: "region-a"})
	})
	mux.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "":
			answer(w, http.StatusUnauthorized, api.Error{Error: `missing Authorization header, expected "Bearer <token>"`, Code: http.StatusUnauthorized})
		case "Bearer good":
			answer(w, http.StatusOK, []api.Machine{})
		default:
			answer(w, http.StatusUnauthorized, api.Error{Error: "unknown token", Code: http.StatusUnauthorized})
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// serveHTTP serves handler on loopback and returns its URL.
func serveHTTP(t *testing.T, handler http.Handler) string {
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv.URL
}

// noToken clears the token variable for the test.
func noToken(t *testing.T) {
	t.Setenv(envToken, "")
	os.Unsetenv(envToken)
}

// TestRegionErrorsSayWhatToDo covers the region errors that do not need Temporal: each
// names the endpoint and what to change.
func TestRegionErrorsSayWhatToDo(t *testing.T) {
	noToken(t)
	auth := authRegion(t)
	notFound := serveHTTP(t, http.NotFoundHandler())
	html := serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!doctype html><html><body>Temporal</body></html>"))
	}))
	grpcGateway := serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte("{\n  \"code\": 5,\n  \"message\": \"Not Found\"\n}"))
	}))
	fake := newFakeRegion(t)
	tests := []struct {
		name     string
		endpoint string
		args     []string
		want     string // exact stderr
	}{
		{"missing token", auth, []string{"machines", "list"},
			`Error: region ` + auth + ` needs an API token: set IRONFLOW_TOKEN or --token (missing Authorization header, expected "Bearer <token>" (HTTP 401))` + "\n"},
		{"unknown token", auth, []string{"--token", "bad", "machines", "list"},
			"Error: region " + auth + " refused the API token (unknown token (HTTP 401)): check IRONFLOW_TOKEN or --token\n"},
		{"404 page not found", notFound, []string{"machines", "show", "birdy"},
			"Error: " + notFound + " is not an Ironflow region (GET /api/v1/info: 404 page not found (HTTP 404)): point -E or IRONFLOW_ENDPOINT at a region API, e.g. http://127.0.0.1:5240\n"},
		{"HTML answer", html, []string{"machines", "list"},
			"Error: " + html + " is not an Ironflow region (GET /api/v1/info: GET /api/v1/info: decode answer: invalid character '<' looking for beginning of value): point -E or IRONFLOW_ENDPOINT at a region API, e.g. http://127.0.0.1:5240\n"},
		{"Temporal web UI", grpcGateway, []string{"machines", "list"},
			"Error: " + grpcGateway + ` is not an Ironflow region (GET /api/v1/info: { "code": 5, "message": "Not Found" } (HTTP 404)): point -E or IRONFLOW_ENDPOINT at a region API, e.g. http://127.0.0.1:5240` + "\n"},
		{"URL without scheme", "127.0.0.1:5240", []string{"machines", "list"},
			`Error: -E "127.0.0.1:5240" (or IRONFLOW_ENDPOINT) is not a region URL: write it with its scheme, e.g. http://127.0.0.1:5240` + "\n"},
		{"host name without scheme", "localhost:5240", []string{"region", "info"},
			`Error: -E "localhost:5240" (or IRONFLOW_ENDPOINT) is not a region URL: write it with its scheme, e.g. http://localhost:5240` + "\n"},
		{"a region's own 404 stays", fake.url, []string{"machines", "show", "nobody"},
			"Error: machines Name:nobody not found (HTTP 404)\n"},
		{"filter field in the wrong case", fake.url, []string{"machines", "list", "name=birdy"},
			`Error: machines have no field "name" (did you mean Name?); fields that can be filtered: ` + strings.Join(filterableFields[api.Machine](), ", ") + "\n"},
		{"misspelt filter field", fake.url, []string{"machines", "list", "Pool=default", "Rakc=x"},
			`Error: machines have no field "Rakc" (did you mean Rack?); fields that can be filtered: ` + strings.Join(filterableFields[api.Machine](), ", ") + "\n"},
		{"cron with six fields", "", []string{"migrations", "schedule", "create", "n", "--cron", "0 0 2 * * *", "--from", "a", "--to", "b", "--pool", "p"},
			`Error: --cron "0 0 2 * * *" has 6 fields; write five: minute hour day-of-month month day-of-week (e.g. "0 2 * * *" for 02:00 UTC every day)` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.endpoint != "" {
				args = append([]string{"-E", tt.endpoint}, args...)
			}
			var out, errOut bytes.Buffer
			code := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
			if code != 1 || errOut.String() != tt.want {
				t.Errorf("exit %d, stderr\n%q\nwant\n%q", code, errOut.String(), tt.want)
			}
		})
	}
	if got := fake.seen(); strings.Contains(strings.Join(got, " "), "?name=") || strings.Contains(strings.Join(got, " "), "Rakc") {
		t.Errorf("a refused filter reached the region: %v", got)
	}
	// A good token still works.
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-E", auth, "--token", "good", "machines", "list"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Errorf("good token: exit %d: %s", code, errOut.String())
	}
}

// TestKeysFollowOneRule: a bare KEY is a name for every noun and verb, a UUID or Field:value
// is sent as it is.
func TestKeysFollowOneRule(t *testing.T) {
	f := newFakeRegion(t)
	tests := []struct {
		args []string
		want string // the request sent
	}{
		{[]string{"machines", "show", "birdy"}, "GET /api/v1/machines/Name:birdy"},
		{[]string{"machines", "show", "Name:birdy"}, "GET /api/v1/machines/Name:birdy"},
		{[]string{"machines", "show", f.machine.Uuid}, "GET /api/v1/machines/" + f.machine.Uuid},
		{[]string{"machines", "update", "birdy", `{"Description":"x"}`}, "PATCH /api/v1/machines/Name:birdy"},
		{[]string{"machines", "delete", "birdy"}, "DELETE /api/v1/machines/Name:birdy"},
		{[]string{"machines", "delete", "birdy", "--migration", "migrate-machine/" + f.machine.Uuid}, "DELETE /api/v1/machines/Name:birdy?migration=migrate-machine%2F" + f.machine.Uuid},
		{[]string{"profiles", "delete", "example-profile"}, "DELETE /api/v1/profiles/Name:example-profile"},
		{[]string{"racks", "delete", "rack-a"}, "DELETE /api/v1/racks/Name:rack-a"},
		{[]string{"leases", "show", "10.0.0.5"}, "GET /api/v1/leases/Addr:10.0.0.5"},
		{[]string{"leases", "show", "MAC:52:54:00:00:00:0a"}, "GET /api/v1/leases/MAC:52:54:00:00:00:0a"},
		{[]string{"jobs", "log", "Task:hello"}, "GET /api/v1/jobs/Task:hello/log"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			before := len(f.seen())
			f.cli(t, "", tt.args...)
			got := f.seen()[before:]
			if len(got) == 0 || got[0] != tt.want {
				t.Errorf("requests %v, want %s first", got, tt.want)
			}
		})
	}
	// racks show and racks transfer resolve rack-a alike.
	region := rackRegion(t)
	code, out, stderr := ironflow(t, region, "racks", "show", "rack-a")
	if code != 0 || !strings.Contains(out, transferRackUUID) {
		t.Errorf("racks show rack-a: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

func TestHelpTexts(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"migrations", "--help"}, []string{"bulk ", "schedule ", "cancel ", "list ", "show "}},
		{[]string{"region", "serve", "--help"}, []string{"--rack-secret string ", "shown by: ironflow racks secret"}},
		{[]string{"machines", "list", "--help"}, []string{"Fields that can be filtered: ", "HardwareAddrs", " Name,", "Examples:\n  ironflow machines list\n"}},
		{[]string{"machines", "show", "--help"}, []string{"Examples:", "(x is Name:x)"}},
		{[]string{"racks", "show", "--help"}, []string{"Examples:", "ironflow racks show x"}},
		{[]string{"migrations", "list", "--help"}, []string{"Examples:", "migrations list --status running"}},
		{[]string{"migrations", "show", "--help"}, []string{"Examples:", "bulk-migrate/<name>", "Name:birdy or birdy"}},
		{[]string{"migrations", "bulk", "--help"}, []string{"Examples:", "--pool default --wait", "(1-50)"}},
		{[]string{"migrations", "schedule", "list", "--help"}, []string{"Examples:"}},
		{[]string{"migrations", "schedule", "trigger", "--help"}, []string{"Examples:", "schedule trigger nightly"}},
		{[]string{"migrations", "schedule", "create", "--help"}, []string{"exactly five fields", "Six fields are refused"}},
		{[]string{"racks", "transfer", "--help"}, []string{"how many machines migrate at once (1-50) (default 5)"}},
		{[]string{"machines", "migrate", "--help"}, []string{"or a name (birdy)"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(context.Background(), tt.args, strings.NewReader(""), &out, &errOut); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("help lacks %q:\n%s", w, out.String())
				}
			}
			if strings.Contains(out.String(), "`") {
				t.Errorf("help shows a backtick (pflag would take it as a placeholder):\n%s", out.String())
			}
		})
	}
}

func TestPortInUsePointsAtFreePorts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = net.Listen("tcp", l.Addr().String())
	if err == nil {
		t.Fatal("second listen on a port in use succeeded")
	}
	if got := portsHint(err, false).Error(); !strings.Contains(got, "address already in use") || !strings.Contains(got, "--free-ports") {
		t.Errorf("hint %q", got)
	}
	if got := portsHint(err, true); got != err {
		t.Errorf("with --free-ports: %v", got)
	}
}
