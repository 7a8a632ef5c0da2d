package ui_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/server"
	"github.com/ironflow/ironflow/region/store"
)

// sessionCookie is the session cookie an answer sets.
func sessionCookie(t *testing.T, p page) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if strings.HasSuffix(c.Name, "ironflow_session") {
			return c
		}
	}
	t.Fatalf("no session cookie in %v", p.header.Values("Set-Cookie"))
	return nil
}

func TestSignInGivesAStrictHttpOnlyCookieAndGoesToNext(t *testing.T) {
	e := newUIEnv(t)
	b := e.browser()
	if p := b.get("/machines?q=Status%3DReady"); p.code != http.StatusSeeOther || p.header.Get("Location") != "/sign-in?next=%2Fmachines%3Fq%3DStatus%253DReady" {
		t.Fatalf("GET /machines without a session: %d to %q, want 303 to the sign-in page", p.code, p.header.Get("Location"))
	}
	p := b.signIn(e.tokens[api.RoleOperator], "/machines?q=Status%3DReady")
	if p.code != http.StatusSeeOther || p.header.Get("Location") != "/machines?q=Status%3DReady" {
		t.Fatalf("sign in: %d to %q: %s", p.code, p.header.Get("Location"), p.body)
	}
	c := sessionCookie(t, p)
	if c.Name != "ironflow_session" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/" {
		t.Errorf("session cookie over HTTP = %+v, want ironflow_session, HttpOnly, SameSite=Strict, Path=/, not Secure", c)
	}
	if c.Value == e.tokens[api.RoleOperator] || strings.Contains(p.header.Get("Set-Cookie"), e.tokens[api.RoleOperator]) {
		t.Error("the session cookie carries the API token")
	}
	if p := b.get("/machines"); p.code != http.StatusOK || !strings.Contains(p.body, "operator-user (operator)") {
		t.Fatalf("GET /machines signed in: %d %s", p.code, p.body)
	}
}

func TestSessionCookieIsSecureBehindTLS(t *testing.T) {
	e := newUIEnv(t, func(c *server.Config) { c.SecureCookies = true })
	c := sessionCookie(t, e.browser().signIn(e.tokens[api.RoleReadonly], ""))
	if c.Name != "__Host-ironflow_session" || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie behind TLS = %+v, want __Host-ironflow_session, Secure, HttpOnly, SameSite=Strict", c)
	}
}

func TestSignInRefusesAnUnknownTokenAndAFormOfAnotherSite(t *testing.T) {
	e := newUIEnv(t)
	b := e.browser()
	if p := b.signIn("not-a-token", ""); p.code != http.StatusUnauthorized || strings.Contains(p.header.Get("Set-Cookie"), "ironflow_session=") {
		t.Errorf("sign in with an unknown token: %d, cookies %v; want 401 and no session", p.code, p.header.Values("Set-Cookie"))
	}
	// Another site posting the sign-in form has no sign-in cookie of this one: it would sign
	// the victim in to the attacker's account.
	forged := e.browser().do(http.MethodPost, "/sign-in", url.Values{"csrf": {"guess"}, "token": {e.tokens[api.RoleReadonly]}}, nil)
	if forged.code != http.StatusForbidden || strings.Contains(forged.header.Get("Set-Cookie"), "ironflow_session=") {
		t.Errorf("forged sign-in: %d, cookies %v; want 403 and no session", forged.code, forged.header.Values("Set-Cookie"))
	}
	form := b.get("/sign-in")
	cross := b.do(http.MethodPost, "/sign-in", url.Values{"csrf": {b.csrf(form)}, "token": {e.tokens[api.RoleReadonly]}},
		http.Header{"Origin": {"https://evil.example"}})
	if cross.code != http.StatusForbidden {
		t.Errorf("sign-in posted from another origin: %d, want 403", cross.code)
	}
}

func TestSignInNeverRedirectsToAnotherSite(t *testing.T) {
	e := newUIEnv(t)
	for _, next := range []string{"https://evil.example/", "//evil.example/x", "/\\evil.example", "http:/evil.example", "javascript:alert(1)", "/%0d%0aLocation:x", " /machines"} {
		p := e.browser().signIn(e.tokens[api.RoleReadonly], next)
		if loc := p.header.Get("Location"); p.code != http.StatusSeeOther || !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") || strings.Contains(loc, "evil") {
			t.Errorf("next=%q: %d to %q, want a path of this site", next, p.code, loc)
		}
	}
}

func TestAPlantedSessionIDIsNeverAdopted(t *testing.T) {
	e := newUIEnv(t)
	b := e.browser()
	planted := &http.Cookie{Name: "ironflow_session", Value: "planted-by-attacker", Path: "/"}
	u, _ := url.Parse(e.base)
	b.http.Jar.SetCookies(u, []*http.Cookie{planted})
	c := sessionCookie(t, b.signIn(e.tokens[api.RoleOperator], ""))
	if c.Value == planted.Value {
		t.Fatal("sign-in kept the session ID the browser came with")
	}
	attacker := e.browser()
	attacker.http.Jar.SetCookies(u, []*http.Cookie{planted})
	if p := attacker.get("/machines"); p.code != http.StatusSeeOther {
		t.Errorf("the planted session ID reaches /machines: %d", p.code)
	}
}

func TestSessionDiesWithItsTokenAndAtSignOut(t *testing.T) {
	e := newUIEnv(t)
	ctx := context.Background()
	token := e.userToken("short-lived", api.RoleOperator)
	b := e.browser()
	b.mustSignIn(token)
	if p := b.get("/machines"); p.code != http.StatusOK {
		t.Fatalf("signed in: %d", p.code)
	}
	// Deleting the user deletes its tokens, and with them the sessions they signed in.
	if err := e.admin.Users().Delete(ctx, "short-lived", false); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/machines"); p.code != http.StatusSeeOther {
		t.Errorf("GET /machines after the token died: %d, want 303 to the sign-in page", p.code)
	}

	b = e.browser()
	b.mustSignIn(e.tokens[api.RoleReadonly])
	machines := b.get("/machines")
	out := b.do(http.MethodPost, "/sign-out", url.Values{"csrf": {b.csrf(machines)}}, nil)
	if out.code != http.StatusSeeOther {
		t.Fatalf("sign out: %d %s", out.code, out.body)
	}
	if p := b.get("/machines"); p.code != http.StatusSeeOther {
		t.Errorf("GET /machines after signing out: %d, want 303 to the sign-in page", p.code)
	}
}

func TestSessionEndsWhenItsTokenExpires(t *testing.T) {
	e := newUIEnv(t)
	ctx := context.Background()
	by := store.Principal{User: "admin", Role: api.RoleAdmin}
	if _, err := e.admin.Users().Create(ctx, api.User{Name: "brief", Role: api.RoleReadonly}); err != nil {
		t.Fatal(err)
	}
	tok, err := e.st.CreateToken(ctx, by, "brief", "", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := e.st.CreateUISession(ctx, tok.Token, 12*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Expires.After(tok.Expires) {
		t.Errorf("session expires %s, after its token (%s)", sess.Expires, tok.Expires)
	}
	testutil.Eventually(t, 10*time.Second, "the session ends with its token", func() bool {
		_, err := e.st.UISessionByID(ctx, sess.ID)
		return errors.Is(err, store.ErrUnauthorized)
	})
}

func TestUIOffServesTheAPIOnly(t *testing.T) {
	e := newUIEnv(t, func(c *server.Config) { c.UI = false })
	for _, path := range []string{"/", "/machines", "/sign-in"} {
		if p := e.browser().get(path); p.code != http.StatusNotFound || !strings.Contains(p.body, `"Error"`) {
			t.Errorf("GET %s with the UI off: %d %s, want the API's 404", path, p.code, p.body)
		}
	}
	if len(e.srv.UIRoutes()) != 0 {
		t.Errorf("UI off, yet %d UI routes", len(e.srv.UIRoutes()))
	}
}
