package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

func TestActionsGoThroughTheAPIsPermissions(t *testing.T) {
	e := newUIEnv(t)
	ctx := context.Background()
	m, err := e.admin.Machines().Create(ctx, api.Machine{Name: "lockable"})
	if err != nil {
		t.Fatal(err)
	}
	path := "/machines/" + m.Uuid

	reader := e.browser()
	reader.mustSignIn(e.tokens[api.RoleReadonly])
	page := reader.get(path)
	if page.code != http.StatusOK {
		t.Fatalf("GET %s as readonly: %d", path, page.code)
	}
	if strings.Contains(page.body, `class="action"`) {
		t.Errorf("readonly sees action buttons on %s", path)
	}
	// A readonly user forging the lock form, with the session's own CSRF token, meets the
	// API's refusal.
	if p := reader.do(http.MethodPost, path+"/lock", url.Values{"csrf": {reader.csrf(page)}}, nil); p.code != http.StatusForbidden {
		t.Errorf("forged lock as readonly: %d, want 403", p.code)
	}

	op := e.browser()
	op.mustSignIn(e.tokens[api.RoleOperator])
	page = op.get(path)
	if !strings.Contains(page.body, `class="action"`) {
		t.Errorf("operator sees no action button on %s", path)
	}
	if p := op.do(http.MethodPost, path+"/lock", url.Values{}, nil); p.code != http.StatusForbidden {
		t.Errorf("lock without the CSRF token: %d, want 403", p.code)
	}
	if p := op.do(http.MethodPost, path+"/lock", url.Values{"csrf": {"wrong"}}, nil); p.code != http.StatusForbidden {
		t.Errorf("lock with a wrong CSRF token: %d, want 403", p.code)
	}
	if p := op.do(http.MethodPost, path+"/lock", url.Values{"csrf": {op.csrf(page)}}, http.Header{"Origin": {"http://evil.example"}}); p.code != http.StatusForbidden {
		t.Errorf("lock posted from another origin: %d, want 403", p.code)
	}
	if got, _ := e.admin.Machines().Get(ctx, m.Uuid); got.Locked {
		t.Fatal("a refused lock locked the machine")
	}
	if p := op.do(http.MethodPost, path+"/lock", url.Values{"csrf": {op.csrf(page)}}, nil); p.code != http.StatusSeeOther {
		t.Fatalf("lock as operator: %d %s", p.code, p.body)
	}
	if got, _ := e.admin.Machines().Get(ctx, m.Uuid); !got.Locked {
		t.Error("the operator's lock did not lock the machine")
	}
	events, err := e.admin.Events(ctx, url.Values{"Kind": {api.KindMachines}, "Key": {m.Uuid}, "Actor": {"operator-user"}})
	if err != nil || len(events) == 0 {
		t.Errorf("the lock is not audited as the operator: %v %v", events, err)
	}
}

func TestUsersPageIsTheAdminsAlone(t *testing.T) {
	e := newUIEnv(t)
	for role, want := range map[string]int{api.RoleAdmin: 200, api.RoleOperator: 403, api.RoleReadonly: 403} {
		b := e.browser()
		b.mustSignIn(e.tokens[role])
		p := b.get("/users")
		if p.code != want {
			t.Errorf("GET /users as %s: %d, want %d", role, p.code, want)
		}
		if nav := strings.Contains(p.body, `href="/users"`); nav != (role == api.RoleAdmin) {
			t.Errorf("GET /users as %s: link to the users page shown: %v", role, nav)
		}
	}
}

func TestPagesCarryStrictSecurityHeaders(t *testing.T) {
	e := newUIEnv(t)
	b := e.browser()
	b.mustSignIn(e.tokens[api.RoleAdmin])
	for _, path := range []string{"/sign-in", "/machines", "/racks", "/pods", "/events", "/users", "/moves", "/dns"} {
		p := b.get(path)
		csp := p.header.Get("Content-Security-Policy")
		if p.code != http.StatusOK || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") ||
			!strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: %d, CSP %q", path, p.code, csp)
		}
		if p.header.Get("X-Frame-Options") != "DENY" || p.header.Get("X-Content-Type-Options") != "nosniff" || p.header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: headers %v", path, p.header)
		}
		if strings.Contains(p.body, "<script>") || strings.Contains(p.body, " style=") || strings.Contains(p.body, " on") && strings.Contains(p.body, "onclick") {
			t.Errorf("GET %s: inline script or style, which the CSP blocks", path)
		}
	}
}

func TestEveryFieldIsEscaped(t *testing.T) {
	e := newUIEnv(t)
	ctx := context.Background()
	const evil = `<img src=x onerror=alert(1)>`
	m, err := e.admin.Machines().Create(ctx, api.Machine{Name: evil, Description: "\"><script>alert(2)</script>", Meta: map[string]string{"k": evil}})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.mustSignIn(e.tokens[api.RoleAdmin])
	for _, path := range []string{"/machines/" + m.Uuid, "/events", "/machines?q=" + url.QueryEscape("Name="+evil)} {
		p := b.get(path)
		if strings.Contains(p.body, "<img src=x") || strings.Contains(p.body, "<script>alert") {
			t.Errorf("GET %s renders markup of a field: %s", path, p.body)
		}
	}
}
