package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/ironflow/ironflow/region/api"
	regiondns "github.com/ironflow/ironflow/region/dns"
	"github.com/ironflow/ironflow/region/server"
)

// fakeRegion answers the routes the CLI uses from the seed's objects and records requests.
type fakeRegion struct {
	t       *testing.T
	url     string
	machine api.Machine // the seed's birdy
	jobs    []api.Job   // the seed's jobs of birdy

	mu       sync.Mutex
	requests []string // "METHOD /escaped/path?query"
	bodies   []string
	auth     []string
}

func newFakeRegion(t *testing.T) *fakeRegion {
	t.Helper()
	f := &fakeRegion{t: t}
	readJSON(t, "testdata/seed-birdy.json", &f.machine)
	readJSON(t, "testdata/seed-jobs.json", &f.jobs)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/machines", func(w http.ResponseWriter, r *http.Request) {
		other := api.Machine{Name: "drp2.rackn", Uuid: "5d0b1f7e-0000-4000-8000-000000000002", Runnable: true, Pool: "default"}
		answer(w, http.StatusOK, []api.Machine{f.machine, other})
	})
	mux.HandleFunc("GET /api/v1/machines/{key}", func(w http.ResponseWriter, r *http.Request) {
		if key := r.PathValue("key"); key != "Name:birdy" && key != f.machine.Uuid {
			answer(w, http.StatusNotFound, api.Error{Error: "machines " + key + " not found", Code: 404})
			return
		}
		answer(w, http.StatusOK, f.machine)
	})
	mux.HandleFunc("POST /api/v1/machines", func(w http.ResponseWriter, r *http.Request) {
		var m api.Machine
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			answer(w, http.StatusBadRequest, api.Error{Error: err.Error(), Code: 400})
			return
		}
		if m.Name == f.machine.Name {
			answer(w, http.StatusConflict, api.Error{Error: "machine Name birdy already exists", Code: 409})
			return
		}
		m.Uuid = "9f0c2b9e-0000-4000-8000-000000000003"
		answer(w, http.StatusCreated, m)
	})
	mux.HandleFunc("PATCH /api/v1/machines/{key}", func(w http.ResponseWriter, r *http.Request) {
		m := f.machine
		m.Description = "patched"
		answer(w, http.StatusOK, m)
	})
	mux.HandleFunc("DELETE /api/v1/{kind}/{key}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /api/v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusOK, f.jobs)
	})
	mux.HandleFunc("GET /api/v1/jobs/{key}/log", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello-world: ok\n")
	})
	mux.HandleFunc("GET /api/v1/racks", func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusOK, []api.Rack{})
	})
	mux.HandleFunc("POST /api/v1/users", func(w http.ResponseWriter, r *http.Request) {
		var u api.User
		json.NewDecoder(r.Body).Decode(&u)
		u.Created = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
		answer(w, http.StatusCreated, u)
	})
	mux.HandleFunc("POST /api/v1/users/{name}/token", func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusOK, api.Token{User: r.PathValue("name"), Role: "operator", Token: "if_s3cret"})
	})
	mux.HandleFunc("GET /api/v1/info", func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusOK, api.Info{Name: "drp1", Uuid: "r-1", URL: "https://drp1:8092", Endpoints: []string{"https://drp1:8092"}, Version: "v1"})
	})

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.mu.Lock()
		req := r.Method + " " + r.URL.EscapedPath()
		if r.URL.RawQuery != "" {
			req += "?" + r.URL.RawQuery
		}
		f.requests = append(f.requests, req)
		f.bodies = append(f.bodies, string(body))
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func answer(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// seen returns the requests recorded so far.
func (f *fakeRegion) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

// cli runs one command line against the fake region.
func (f *fakeRegion) cli(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"-E", f.url}, args...), strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestShowPrintsTheSeedShape(t *testing.T) {
	f := newFakeRegion(t)
	code, out, stderr := f.cli(t, "", "machines", "show", "Name:birdy")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := readFile(t, "testdata/seed-birdy.json"); out != want {
		t.Errorf("machines show printed\n%s\nwant\n%s", out, want)
	}
	if got := f.seen(); len(got) != 1 || got[0] != "GET /api/v1/machines/Name:birdy" {
		t.Errorf("requests %v", got)
	}
}

func TestJobsListPrintsTheSeedShape(t *testing.T) {
	f := newFakeRegion(t)
	code, out, stderr := f.cli(t, "", "jobs", "list", "Machine=01d8828f-2f7d-4a1c-a1fa-f668274c7c44")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := readFile(t, "testdata/seed-jobs.json"); out != want {
		t.Errorf("jobs list printed\n%s\nwant\n%s", out, want)
	}
	if got := f.seen(); len(got) != 1 || got[0] != "GET /api/v1/jobs?Machine=01d8828f-2f7d-4a1c-a1fa-f668274c7c44" {
		t.Errorf("requests %v", got)
	}
}

func TestYAMLOutputRoundTrips(t *testing.T) {
	f := newFakeRegion(t)
	code, out, stderr := f.cli(t, "", "-o", "yaml", "machines", "show", "Name:birdy")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "\nName: birdy\n") || !strings.Contains(out, "\nProfiles:\n- example-profile\n- conflicting-profile\n") {
		t.Errorf("YAML output:\n%s", out)
	}
	var back api.Machine
	if err := yaml.UnmarshalStrict([]byte(out), &back); err != nil {
		t.Fatalf("YAML does not parse back: %v", err)
	}
	if back.Uuid != f.machine.Uuid || back.Secret != f.machine.Secret || back.Meta["machine-role"] != "machine" {
		t.Errorf("YAML parsed back to %+v", back)
	}
}

func TestTableOutput(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"machines", "list"}, "" +
			"UUID                                  NAME        ADDRESS  WORKFLOW     STAGE        RUNNABLE  LOCKED  POOL     RACK  STATUS  POWER\n" +
			"01d8828f-2f7d-4a1c-a1fa-f668274c7c44  birdy                hello-world  hello-world  true      false   default                -\n" +
			"5d0b1f7e-0000-4000-8000-000000000002  drp2.rackn                                     true      false   default                -\n"},
		{[]string{"racks", "list"}, "UUID  NAME  STATUS  LAST SEEN  VERSION  REGIONS\n"},
		{[]string{"jobs", "list"}, "" +
			"UUID                                  MACHINE                               TASK               STATE     EXIT      START                      END\n" +
			"1ed352bc-1301-695a-94d2-8dc4daeea809  01d8828f-2f7d-4a1c-a1fa-f668274c7c44  stage:hello-world  finished  complete  2022-09-15T15:22:35-04:00  2022-09-15T15:22:35-04:00\n" +
			"1ed352bc-1303-63f2-94d2-19d9b7aba263  01d8828f-2f7d-4a1c-a1fa-f668274c7c44  hello-world        finished            2022-09-15T15:22:35-04:00  2022-09-15T15:23:04-04:00\n"},
		{[]string{"region", "info"}, "" +
			"NAME  UUID  URL                VERSION  ENDPOINTS\n" +
			"drp1  r-1   https://drp1:8092  v1       https://drp1:8092\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f := newFakeRegion(t)
			code, out, stderr := f.cli(t, "", append([]string{"-o", "table"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if out != tt.want {
				t.Errorf("table\n%q\nwant\n%q", out, tt.want)
			}
		})
	}
}

func TestWritesSendTheObject(t *testing.T) {
	file := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(file, []byte(`{"Name":"fromfile","Pool":"default"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		stdin   string
		args    []string
		request string
		body    func(t *testing.T, body string)
		wantOut string // substring of stdout
	}{
		{"create inline", "", []string{"machines", "create", `{"Name":"inline","HardwareAddrs":["52:54:00:12:34:56"]}`},
			"POST /api/v1/machines", wantField("Name", "inline"), `"Uuid": "9f0c2b9e-0000-4000-8000-000000000003"`},
		{"create from file", "", []string{"machines", "create", "@" + file},
			"POST /api/v1/machines", wantField("Name", "fromfile"), `"Name": "fromfile"`},
		{"create from stdin", `{"Name":"piped"}`, []string{"machines", "create", "-"},
			"POST /api/v1/machines", wantField("Name", "piped"), `"Name": "piped"`},
		{"update is a merge patch", "", []string{"machines", "update", "Name:birdy", `{"Description":"patched","Meta":{"machine-role":null}}`},
			"PATCH /api/v1/machines/Name:birdy", wantBody(`{"Description":"patched","Meta":{"machine-role":null}}`), `"Description": "patched"`},
		{"delete", "", []string{"machines", "delete", "Name:birdy"}, "DELETE /api/v1/machines/Name:birdy", wantBody(""), "Deleted machine Name:birdy\n"},
		{"force delete a rack", "", []string{"racks", "delete", "r-1", "--force"}, "DELETE /api/v1/racks/Name:r-1?force=true", wantBody(""), "Deleted rack r-1\n"},
		{"key with a slash", "", []string{"vlans", "delete", "Name:a/b"}, "DELETE /api/v1/vlans/Name:a%2Fb", wantBody(""), "Deleted VLAN Name:a/b\n"},
		{"job log", "", []string{"jobs", "log", "1ed352bc-1303-63f2-94d2-19d9b7aba263"},
			"GET /api/v1/jobs/1ed352bc-1303-63f2-94d2-19d9b7aba263/log", wantBody(""), "hello-world: ok\n"},
		{"user create", "", []string{"users", "create", "alice", "--role", "operator"},
			"POST /api/v1/users", wantField("Role", "operator"), `"Created": "2026-11-30T06:00:00Z"`},
		{"user token", "", []string{"users", "token", "alice", "--role", "readonly", "--ttl", "24h"},
			"POST /api/v1/users/alice/token", wantBody(`{"Role":"readonly","TTL":86400000000000}`), "if_s3cret\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRegion(t)
			code, out, stderr := f.cli(t, tt.stdin, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got := f.seen(); len(got) != 1 || got[0] != tt.request {
				t.Fatalf("requests %v, want [%s]", got, tt.request)
			}
			tt.body(t, f.bodies[0])
			if !strings.Contains(out, tt.wantOut) {
				t.Errorf("stdout %q does not contain %q", out, tt.wantOut)
			}
		})
	}
}

func wantBody(want string) func(*testing.T, string) {
	return func(t *testing.T, body string) {
		t.Helper()
		if body != want {
			t.Errorf("request body %s, want %s", body, want)
		}
	}
}

func wantField(field, value string) func(*testing.T, string) {
	return func(t *testing.T, body string) {
		t.Helper()
		var obj map[string]any
		if err := json.Unmarshal([]byte(body), &obj); err != nil || obj[field] != value {
			t.Errorf("request body %s: want %s=%q", body, field, value)
		}
	}
}

// TestBadInputFails checks the error paths: exit status 1, one "Error: ..." line on stderr,
// nothing on stdout, and no request when the input is refused locally.
func TestBadInputFails(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		stderr    string // exact
		requested bool
	}{
		{"unknown output format", []string{"-o", "xml", "machines", "list"},
			`Error: invalid argument "xml" for "-o, --output" flag: unknown output format "xml" (want json, yaml or table)` + "\n", false},
		{"malformed JSON", []string{"machines", "create", `{"Name":`},
			"Error: machine: malformed JSON: unexpected EOF\n", false},
		{"JSON that is not an object", []string{"machines", "create", `["birdy"]`},
			"Error: machine: malformed JSON: want an object\n", false},
		{"trailing data", []string{"machines", "create", `{"Name":"a"} {}`},
			"Error: machine: malformed JSON: unexpected data after the object\n", false},
		{"unknown field", []string{"machines", "update", "Name:birdy", `{"Nmae":"x"}`},
			"Error: machine patch: malformed JSON: json: unknown field \"Nmae\"\n", false},
		{"wrong type", []string{"profiles", "create", `{"Name":"p","Profiles":"a"}`},
			"Error: profile: malformed JSON: json: cannot unmarshal string into Go struct field Profile.Profiles of type []string\n", false},
		{"missing file", []string{"pools", "create", "@/nonexistent/pool.json"},
			"Error: read JSON file: open /nonexistent/pool.json: no such file or directory\n", false},
		{"filter without =", []string{"machines", "list", "Name"},
			`Error: filter "Name": want Field=value` + "\n", false},
		{"unknown role", []string{"users", "create", "bob", "--role", "root"},
			`Error: unknown role "root" (want one of admin, operator, readonly, rack, machine)` + "\n", false},
		{"missing role", []string{"users", "create", "bob"},
			`Error: required flag(s) "role" not set` + "\n", false},
		{"negative ttl", []string{"users", "token", "bob", "--ttl", "-1h"},
			"Error: --ttl -1h0m0s: must not be negative\n", false},
		{"missing key", []string{"machines", "show"},
			"Error: accepts 1 arg(s), received 0\n", false},
		{"conflict from the API", []string{"machines", "create", `{"Name":"birdy"}`},
			"Error: machine Name birdy already exists (HTTP 409)\n", true},
		{"not found from the API", []string{"machines", "show", "Name:nope"},
			"Error: machines Name:nope not found (HTTP 404)\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRegion(t)
			code, out, stderr := f.cli(t, "", tt.args...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if stderr != tt.stderr {
				t.Errorf("stderr %q, want %q", stderr, tt.stderr)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			if got := f.seen(); (len(got) > 0) != tt.requested {
				t.Errorf("requests %v, want requested=%v", got, tt.requested)
			}
		})
	}
}

func TestUnreachableRegion(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"-E", srv.URL, "machines", "list"}, strings.NewReader(""), &out, &errOut)
	if code != 1 || !strings.HasPrefix(errOut.String(), "Error: GET "+srv.URL+"/api/v1/machines: ") || !strings.Contains(errOut.String(), "connection refused") {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
}

func TestEnvironmentFallbacks(t *testing.T) {
	f := newFakeRegion(t)
	t.Setenv(envEndpoint, f.url)
	t.Setenv(envToken, "from-env")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"region", "info"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if code := run(context.Background(), []string{"--token", "from-flag", "region", "info"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := []string{"Bearer from-env", "Bearer from-flag"}; strings.Join(f.auth, "|") != strings.Join(want, "|") {
		t.Errorf("Authorization headers %q, want %q", f.auth, want)
	}
}

func TestServeConfig(t *testing.T) {
	limits, retention := server.DefaultLimits, server.Retention{MaxAge: 90 * 24 * time.Hour, MaxCount: 1000000}
	syslogRetention := server.Retention{MaxAge: 30 * 24 * time.Hour, MaxCount: 10000000}
	const imageMax = server.DefaultImageMaxBytes
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want server.Config
	}{
		{"defaults", nil, nil, server.Config{Listen: ":5240", Version: version, UI: true, Limits: limits, Retention: retention, SyslogRetention: syslogRetention, ImageMaxBytes: imageMax}},
		{"environment", map[string]string{
			"IRONFLOW_DATABASE_URL": "postgres://env/db", "IRONFLOW_LISTEN": ":6000", "IRONFLOW_REGION_NAME": "drp1",
			"IRONFLOW_PUBLIC_URL": "https://drp1:8092", "IRONFLOW_ADMIN_TOKEN": "t0k",
			"IRONFLOW_READ_TIMEOUT": "5s", "IRONFLOW_MAX_CONNS": "10", "IRONFLOW_EVENTS_MAX_AGE": "0s", "IRONFLOW_EVENTS_MAX_COUNT": "50",
			"IRONFLOW_SYSLOG_MAX_AGE": "24h", "IRONFLOW_SYSLOG_MAX_COUNT": "0",
		}, nil, server.Config{DatabaseURL: "postgres://env/db", Listen: ":6000", Name: "drp1", PublicURL: "https://drp1:8092", AdminToken: "t0k", Version: version, UI: true, SecureCookies: true,
			Limits:    server.Limits{ReadTimeout: 5 * time.Second, WriteTimeout: limits.WriteTimeout, IdleTimeout: limits.IdleTimeout, MaxHeaderBytes: limits.MaxHeaderBytes, MaxConns: 10},
			Retention: server.Retention{MaxCount: 50}, SyslogRetention: server.Retention{MaxAge: 24 * time.Hour}, ImageMaxBytes: imageMax}},
		{"flags win", map[string]string{"IRONFLOW_DATABASE_URL": "postgres://env/db", "IRONFLOW_REGION_NAME": "drp1", "IRONFLOW_IDLE_TIMEOUT": "1s"},
			[]string{"--database-url", "postgres://flag/db", "--listen", "127.0.0.1:7000", "--name", "drp2", "--public-url", "https://drp2:8092", "--admin-token", "flagtok", "--idle-timeout", "2s", "--syslog-max-count", "5", "--images-dir", "/srv/images", "--images-max-size", "1024"},
			server.Config{DatabaseURL: "postgres://flag/db", Listen: "127.0.0.1:7000", Name: "drp2", PublicURL: "https://drp2:8092", AdminToken: "flagtok", Version: version, UI: true, SecureCookies: true,
				Limits: server.Limits{ReadTimeout: limits.ReadTimeout, WriteTimeout: limits.WriteTimeout, IdleTimeout: 2 * time.Second, MaxHeaderBytes: limits.MaxHeaderBytes, MaxConns: limits.MaxConns}, Retention: retention,
				SyslogRetention: server.Retention{MaxAge: syslogRetention.MaxAge, MaxCount: 5}, ImagesDir: "/srv/images", ImageMaxBytes: 1024}},
		{"zone transfers", map[string]string{"IRONFLOW_DNS_TRANSFER_FROM": "none"}, []string{"--dns-transfer-from", "10.1.0.0/16, 192.0.2.7"},
			server.Config{Listen: ":5240", Version: version, UI: true, Limits: limits, Retention: retention, SyslogRetention: syslogRetention,
				DNSTransferFrom: regiondns.TransferFrom{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("192.0.2.7/32")}, ImageMaxBytes: imageMax}},
		{"no zone transfers", map[string]string{"IRONFLOW_DNS_TRANSFER_FROM": "none"}, nil,
			server.Config{Listen: ":5240", Version: version, UI: true, Limits: limits, Retention: retention, SyslogRetention: syslogRetention, DNSTransferFrom: regiondns.TransferFrom{}, ImageMaxBytes: imageMax}},
		{"API only", map[string]string{"IRONFLOW_UI": "true", "IRONFLOW_TEMPORAL_UI": "http://temporal:8233"}, []string{"--ui=false"},
			server.Config{Listen: ":5240", Version: version, TemporalUI: "http://temporal:8233", Limits: limits, Retention: retention, SyslogRetention: syslogRetention, ImageMaxBytes: imageMax}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearServeEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cmd, flags := regionServeFlagsOf(t, tt.args)
			if got, err := flags.config(cmd); err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("config %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	t.Run("bad values", func(t *testing.T) {
		clearServeEnv(t)
		t.Setenv("IRONFLOW_MAX_CONNS", "many")
		var flags regionServeFlags
		cmd := &cobra.Command{Use: "serve"}
		flags.declare(cmd.Flags())
		if err := parseWithEnv(cmd, nil); err == nil || !strings.Contains(err.Error(), `IRONFLOW_MAX_CONNS="many": invalid value for --max-conns`) {
			t.Errorf("error %v, want the variable and its value named", err)
		}
		t.Setenv("IRONFLOW_MAX_CONNS", "-1")
		cmd, flags2 := regionServeFlagsOf(t, []string{"--read-timeout", "-1s", "--dns-transfer-from", "10.0.0.0/8,racks"})
		_, err := flags2.config(cmd)
		if err == nil || !strings.Contains(err.Error(), `--read-timeout: -1s is negative`) || !strings.Contains(err.Error(), `IRONFLOW_MAX_CONNS (--max-conns): -1 is negative`) ||
			!strings.Contains(err.Error(), `--dns-transfer-from: "racks"`) {
			t.Errorf("error %v, want every bad value named where it came from", err)
		}
	})
}

// regionServeFlagsOf parses args and the environment into region serve's flags.
func regionServeFlagsOf(t *testing.T, args []string) (*cobra.Command, *regionServeFlags) {
	t.Helper()
	var flags regionServeFlags
	cmd := &cobra.Command{Use: "serve"}
	flags.declare(cmd.Flags())
	if err := parseWithEnv(cmd, args); err != nil {
		t.Fatal(err)
	}
	return cmd, &flags
}

// clearServeEnv unsets the variables of region serve's flags.
func clearServeEnv(t *testing.T) {
	var flags regionServeFlags
	cmd := &cobra.Command{Use: "serve"}
	flags.declare(cmd.Flags())
	unsetFlagEnv(t, cmd)
}

func TestServeWithoutDatabaseFails(t *testing.T) {
	t.Setenv("IRONFLOW_DATABASE_URL", "")
	os.Unsetenv("IRONFLOW_DATABASE_URL")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"region", "serve", "--listen", "127.0.0.1:0"}, strings.NewReader(""), &out, &errOut)
	if code != 1 || errOut.String() != "Error: no database: give --database-url or set IRONFLOW_DATABASE_URL\n" {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
}
