package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/server"
	"github.com/ironflow/ironflow/region/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is a running server on a fresh database with one token per role.
type env struct {
	t      testing.TB
	st     *store.Store
	db     string            // the database's URL, for rows a test writes as an earlier version did
	base   string            // http://127.0.0.1:port
	tokens map[string]string // role -> token
}

// newEnv starts a server on a fresh database, its config adjusted by opts. Tokens exist for
// every role except machine, whose user is named after a machine (see env.machineToken).
func newEnv(t testing.TB, opts ...func(*server.Config)) *env {
	t.Helper()
	ctx := context.Background()
	db := pgtest.NewDatabase(t)
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	admin, created, err := st.BootstrapAdmin(ctx, "")
	if err != nil || !created {
		t.Fatalf("BootstrapAdmin = %v, %v", created, err)
	}
	e := &env{t: t, st: st, db: db, tokens: map[string]string{api.RoleAdmin: admin}}
	e.base = startServer(t, st, "test-region", opts...)
	for _, role := range []string{api.RoleOperator, api.RoleReadonly, api.RoleRack} {
		e.tokens[role] = e.userToken(role+"-user", role)
	}
	return e
}

// startServer serves st on a fresh 127.0.0.1 port until the test ends and returns its URL;
// opts adjust the config.
func startServer(t testing.TB, st *store.Store, name string, opts ...func(*server.Config)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	cfg := server.Config{Name: name, PublicURL: base, Version: "test-1", Logger: testLogger(t)}
	for _, opt := range opts {
		opt(&cfg)
	}
	s := server.New(st, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	waitHeartbeat(t, st, base)
	return base
}

// waitHeartbeat waits until the server at base has recorded its first heartbeat, so every
// process of the region lists it in Info.Endpoints. It reads the store, not the server, so a
// test's request counts stay its own.
func waitHeartbeat(t testing.TB, st *store.Store, base string) {
	t.Helper()
	testutil.EventuallyOK(t, 30*time.Second, func() string {
		endpoints, err := st.Endpoints(context.Background(), time.Minute)
		if err == nil && slices.Contains(endpoints, base) {
			return ""
		}
		return fmt.Sprintf("server %s has no heartbeat after 30 s (endpoints %v, %v)", base, endpoints, err)
	})
}

// userToken creates a user with role and returns a token for it.
func (e *env) userToken(name, role string) string {
	e.t.Helper()
	ctx := context.Background()
	by := store.Principal{User: "test", Role: api.RoleAdmin}
	if err := e.st.Create(ctx, by, api.KindUsers, &api.User{Name: name, Role: role}); err != nil {
		e.t.Fatalf("create user %s: %v", name, err)
	}
	tok, err := e.st.CreateToken(ctx, by, name, "", 0)
	if err != nil {
		e.t.Fatalf("token for %s: %v", name, err)
	}
	return tok.Token
}

// machineToken returns a machine-role token for the machine with uuid.
func (e *env) machineToken(uuid string) string {
	return e.userToken(uuid, api.RoleMachine)
}

// response is an answer read in full.
type response struct {
	code   int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v: %s", r.code, err, r.body)
	}
	return m
}

func (r response) list(t testing.TB) []map[string]any {
	t.Helper()
	var l []map[string]any
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatalf("answer %d is not a JSON array: %v: %s", r.code, err, r.body)
	}
	return l
}

// apiError checks that r is a JSON error with the given code and returns its message.
func (r response) apiError(t testing.TB, code int) string {
	t.Helper()
	if r.code != code {
		t.Fatalf("status %d, want %d: %s", r.code, code, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var e api.Error
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("error body is not an api.Error: %v: %s", err, r.body)
	}
	if e.Code != code || e.Error == "" {
		t.Fatalf("error body %+v, want Code %d and a message", e, code)
	}
	return e.Error
}

// asMove stands, as do's role, for the move's own calls: an admin token marked api.HeaderMove,
// as the workers' clients send them.
const asMove = "move"

// do sends a request with the token of role ("" for none; asMove for the move's). body is
// sent as is when it is a string or []byte, else as JSON.
func (e *env) do(role, method, path string, body any) response {
	e.t.Helper()
	if role == asMove {
		req := newRequest(e.t, e.tokens[api.RoleAdmin], method, e.base+path, body)
		req.Header.Set(api.HeaderMove, "1")
		return send(e.t, req)
	}
	return doRequest(e.t, e.tokens[role], method, e.base+path, body)
}

func doRequest(t testing.TB, token, method, url string, body any) response {
	t.Helper()
	return send(t, newRequest(t, token, method, url, body))
}

func newRequest(t testing.TB, token, method, url string, body any) *http.Request {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// send sends req and reads the whole answer.
func send(t testing.TB, req *http.Request) response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", req.Method, req.URL, err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: data}
}

// mustDo is do that expects status code.
func (e *env) mustDo(role, method, path string, body any, code int) response {
	e.t.Helper()
	r := e.do(role, method, path, body)
	if r.code != code {
		e.t.Fatalf("%s %s as %s: status %d, want %d: %s", method, path, role, r.code, code, r.body)
	}
	return r
}

// create POSTs obj as admin and returns the created object.
func (e *env) create(kind string, obj any) map[string]any {
	e.t.Helper()
	return e.mustDo(api.RoleAdmin, http.MethodPost, "/api/v1/"+kind, obj, http.StatusCreated).json(e.t)
}

// fixtures are the objects other kinds refer to.
type fixtures struct {
	machine, rack, fabric, vlan, subnet string // UUIDs
}

func (e *env) fixtures() fixtures {
	var f fixtures
	f.machine = e.create(api.KindMachines, map[string]any{"Name": "fixture-machine", "HardwareAddrs": []string{"52:54:00:00:00:01"}})["Uuid"].(string)
	f.rack = e.create(api.KindRacks, map[string]any{"Name": "fixture-rack"})["Uuid"].(string)
	f.fabric = e.create(api.KindFabrics, map[string]any{"Name": "fixture-fabric"})["Uuid"].(string)
	f.vlan = e.create(api.KindVLANs, map[string]any{"Name": "fixture-vlan", "Fabric": f.fabric, "VID": 10})["Uuid"].(string)
	f.subnet = e.create(api.KindSubnets, map[string]any{"Name": "fixture-subnet", "CIDR": "10.0.0.0/24", "VLAN": f.vlan})["Uuid"].(string)
	return f
}

// testLogger logs to the test output.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// syncBuffer is safe for a logger and a test reading it at once.
type syncBuffer = testutil.SafeBuffer

// eventually polls cond until it holds or a generous deadline passes (for state that other
// processes change, such as a database coming back).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, what, cond)
}
