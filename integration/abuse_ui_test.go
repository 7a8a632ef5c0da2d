package integration

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// Who may call a route of the web UI, one column per caller:
//
//	anonymous admin-bearer readonly operator admin operator-without-csrf
//
// "admin-bearer" sends the admin token as a bearer and no cookie: the UI reads sessions
// only, so an API token never acts through it. The others hold a session signed in with
// their token; their posts carry the session's CSRF token but the last column's.
// "S" is sent to the sign-in page (303), "U" 401, "F" 403, "." anything else. Paths name
// objects that do not exist, so that no call changes anything.
var abuseUIRoutes = map[string]string{
	"GET /{$}":           ". . . . . .",
	"GET /sign-in":       ". . . . . .",
	"GET /static/{file}": ". . . . . .",
	// No sign-in form was loaded, so there is no sign-in cookie to match: refused.
	"POST /sign-in": "F F F F F F",
	// Signed out, a session goes to the sign-in page.
	"POST /sign-out":                     "U U S S S F",
	"GET /machines":                      "S S . . . .",
	"GET /machines/{key}":                "S S . . . .",
	"GET /machines/{key}/logs/stream":    "S S . . . .",
	"POST /machines/{key}/lock":          "U U F . . F",
	"POST /machines/{key}/unlock":        "U U F . . F",
	"GET /racks":                         "S S . . . .",
	"GET /racks/{uuid}":                  "S S . . . .",
	"POST /racks/{uuid}/transfer":        "U U F . . F",
	"POST /racks/{uuid}/transfer/pause":  "U U F . . F",
	"POST /racks/{uuid}/transfer/resume": "U U F . . F",
	"GET /moves":                         "S S . . . .",
	"GET /dns":                           "S S . . . .",
	"GET /pods":                          "S S . . . .",
	"GET /events":                        "S S . . . .",
	"GET /session":                       "S S . . . .",
	"GET /users":                         "S S F F . F",
}

var abuseUICallers = []string{"anonymous", "admin-bearer", "readonly", "operator", "admin", "operator-without-csrf"}

// abuseUI calls every route of the UI as each caller, and checks that every route the UI
// signs in for names a resource of the API's permission table.
func abuseUI(t *testing.T, s *abuseStack) {
	resources := map[string]bool{"": true}
	for _, rt := range s.srv.Routes() {
		resources[rt.Resource] = true
	}
	served := map[string]bool{}
	for _, rt := range s.srv.UIRoutes() {
		served[rt.Pattern] = true
		if _, ok := abuseUIRoutes[rt.Pattern]; !ok {
			t.Errorf("UI route %q is not in the abuse suite: add its row to abuseUIRoutes (integration/abuse_ui_test.go) and ARCHITECTURE.md's threat model", rt.Pattern)
		}
		if !rt.Public && !resources[rt.Resource] {
			t.Errorf("UI route %q reads %q, which no API route's permission covers", rt.Pattern, rt.Resource)
		}
	}
	for pattern := range abuseUIRoutes {
		if !served[pattern] {
			t.Errorf("the abuse suite covers UI route %q, which the region does not serve: remove its row", pattern)
		}
	}
	for _, pattern := range slices.Sorted(func(yield func(string) bool) {
		for p := range served {
			if !yield(p) {
				return
			}
		}
	}) {
		t.Run(pattern, func(t *testing.T) {
			method, path, _ := strings.Cut(pattern, " ")
			path = strings.NewReplacer("{$}", "", "{key}", abuseMissing, "{uuid}", abuseMissing, "{file}", "missing.css").Replace(path)
			if strings.HasSuffix(path, "/stream") {
				path += "?after=0"
			}
			got := make([]string, len(abuseUICallers))
			for i, caller := range abuseUICallers {
				got[i] = s.uiCall(t, caller, method, path)
			}
			if want, have := abuseUIRoutes[pattern], strings.Join(got, " "); have != want {
				t.Errorf("%s %s: who may call it\n have %s\n want %s\n      (%s)", method, path, have, want, strings.Join(abuseUICallers, ", "))
			}
		})
	}
}

// uiCall calls the UI as caller with a fresh session (a sign-out ends only its own) and
// returns the answer's mark; the body is not read, so a stream ends with the call.
func (s *abuseStack) uiCall(t *testing.T, caller, method, path string) string {
	t.Helper()
	roles := map[string]principal{"readonly": readonly, "operator": operator, "admin": admin, "operator-without-csrf": operator}
	var form url.Values
	if method != http.MethodGet {
		form = url.Values{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader("")
	}
	header := http.Header{}
	if who, ok := roles[caller]; ok {
		sess, err := s.st.CreateUISession(ctx, s.tokens[who], time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		header.Set("Cookie", "ironflow_session="+sess.ID)
		if form != nil && caller != "operator-without-csrf" {
			body = strings.NewReader(url.Values{"csrf": {sess.CSRF}}.Encode())
		}
	}
	if caller == "admin-bearer" {
		header.Set("Authorization", "Bearer "+s.tokens[admin])
	}
	var req *http.Request
	var err error
	if body != nil {
		req, err = http.NewRequestWithContext(ctx, method, s.url+path, body)
		header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req, err = http.NewRequestWithContext(ctx, method, s.url+path, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatalf("%s %s as %s: %v", method, path, caller, err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		t.Errorf("%s %s as %s: %d", method, path, caller, resp.StatusCode)
	}
	switch {
	case resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/sign-in"):
		return "S"
	case resp.StatusCode == http.StatusUnauthorized:
		return "U"
	case resp.StatusCode == http.StatusForbidden:
		return "F"
	}
	return "."
}
