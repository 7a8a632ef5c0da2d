package ui_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/region/server"
	"github.com/ironflow/ironflow/region/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const rackSecret = "ui-test-rack-secret"

// uiEnv is a region with its UI on a fresh database, and a token of each user role.
type uiEnv struct {
	t      testing.TB
	st     *store.Store
	srv    *server.Server
	base   string
	admin  *client.Client
	tokens map[string]string // role → token
}

func newUIEnv(t testing.TB, opts ...func(*server.Config)) *uiEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	adminToken, _, err := st.BootstrapAdmin(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &uiEnv{t: t, st: st, base: "http://" + ln.Addr().String(), tokens: map[string]string{api.RoleAdmin: adminToken}}
	cfg := server.Config{Name: "ui-region", PublicURL: e.base, Version: "test", RackSecret: rackSecret, UI: true,
		TemporalUI: "http://temporal.example:8233", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if os.Getenv("IRONFLOW_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	for _, opt := range opts {
		opt(&cfg)
	}
	e.srv = server.New(st, cfg)
	serveCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.srv.Serve(serveCtx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("region: %v", err)
		}
	})
	e.admin = client.New(e.base, adminToken)
	for _, role := range []string{api.RoleOperator, api.RoleReadonly} {
		e.tokens[role] = e.userToken(role+"-user", role)
	}
	return e
}

// userToken creates a user with role and mints a token of it.
func (e *uiEnv) userToken(name, role string) string {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.admin.Users().Create(ctx, api.User{Name: name, Role: role}); err != nil {
		e.t.Fatalf("create user %s: %v", name, err)
	}
	tok, err := e.admin.MintToken(ctx, name, api.TokenRequest{})
	if err != nil {
		e.t.Fatalf("token of %s: %v", name, err)
	}
	return tok.Token
}

// browser is an HTTP client with a cookie jar that does not follow redirects, like a
// browser seen one request at a time.
type browser struct {
	t    testing.TB
	base string
	http *http.Client
}

func (e *uiEnv) browser() *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return &browser{t: e.t, base: e.base, http: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// page is an answer read whole.
type page struct {
	code   int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values, header http.Header) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{code: resp.StatusCode, header: resp.Header, body: string(data)}
}

func (b *browser) get(path string) page { return b.do(http.MethodGet, path, nil, nil) }

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the first form of p.
func (b *browser) csrf(p page) string {
	b.t.Helper()
	m := csrfInput.FindStringSubmatch(p.body)
	if m == nil {
		b.t.Fatalf("no CSRF field in the page (%d): %s", p.code, p.body)
	}
	return m[1]
}

// signIn signs in with token through the form and returns the answer to the form's post.
func (b *browser) signIn(token, next string) page {
	b.t.Helper()
	form := b.get("/sign-in")
	if form.code != http.StatusOK {
		b.t.Fatalf("GET /sign-in: %d", form.code)
	}
	return b.do(http.MethodPost, "/sign-in", url.Values{"csrf": {b.csrf(form)}, "token": {token}, "next": {next}}, nil)
}

// mustSignIn signs in and fails the test unless the UI accepted it.
func (b *browser) mustSignIn(token string) {
	b.t.Helper()
	if p := b.signIn(token, ""); p.code != http.StatusSeeOther {
		b.t.Fatalf("sign in: %d %s", p.code, p.body)
	}
}
