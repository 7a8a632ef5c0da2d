// Package ui is the region's web UI: server-rendered pages over the region API. Every page
// and action is a call of the API made in process as the signed-in principal, so the UI
// reaches nothing the API's permission table does not let that principal reach.
package ui

import (
	"context"
	"crypto/subtle"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/region/store"
)

// Sessions keeps the UI's signed-in sessions (region/store's UI sessions).
type Sessions interface {
	CreateUISession(ctx context.Context, token string, ttl time.Duration) (store.UISession, error)
	UISessionByID(ctx context.Context, id string) (store.UISession, error)
	DeleteUISession(ctx context.Context, id string) error
}

// Config wires the UI to its region.
type Config struct {
	Sessions Sessions
	// API returns a client of the region API that acts as by (in process: no token leaves
	// the session store).
	API func(by store.Principal) *client.Client
	// May says whether role may read or write resource by the API's permission table; the
	// UI only uses it to leave out the buttons of actions the API would refuse.
	May func(role, resource string, write bool) bool
	// Transfers starts and controls rack transfers; nil: the UI shows them, if at all, only
	// through links to the Temporal UI.
	Transfers Transfers
	// TemporalUI is the base URL of the Temporal web UI for links to moves; "" shows none.
	TemporalUI string
	// SecureCookies marks cookies Secure even on plain HTTP (a TLS-terminating proxy in front).
	SecureCookies bool
	SessionTTL    time.Duration // default 12 h
	Logger        *slog.Logger
}

const defaultSessionTTL = 12 * time.Hour

// Cookie names. A __Host- cookie is Secure, host-only and Path=/, which browsers enforce.
const (
	sessionCookie       = api.UISessionCookie
	secureSessionCookie = api.UISecureSessionCookie
	signInCookie        = "ironflow_signin" // the sign-in form's CSRF value (double submit)
	csrfField           = "csrf"
)

// Route is one pattern of the UI. Resource and Write name the API permission the route's
// API calls need (documentation for the abuse suite; the API itself enforces it).
type Route struct {
	Pattern  string
	Public   bool // served without a session (sign-in, assets)
	Resource string
	Write    bool
	Handler  http.Handler
}

// UI serves the pages.
type UI struct {
	cfg    Config
	log    *slog.Logger
	pages  map[string]*template.Template
	assets *assets
	routes []Route
}

// New builds the UI.
func New(cfg Config) (*UI, error) {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = defaultSessionTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a, err := loadAssets()
	if err != nil {
		return nil, err
	}
	u := &UI{cfg: cfg, log: cfg.Logger, assets: a}
	if u.pages, err = parsePages(a); err != nil {
		return nil, err
	}
	u.routes = u.table()
	return u, nil
}

// Routes is every route of the UI, for the region's mux and the abuse suite.
func (u *UI) Routes() []Route { return u.routes }

// page is a handler of a signed-in request.
type page func(w http.ResponseWriter, r *http.Request, s *signedIn) error

// signedIn is the session of a request and its API client.
type signedIn struct {
	sess store.UISession
	api  *client.Client
}

// public wraps a handler that needs no session with the security headers.
func (u *UI) public(pattern string, h http.HandlerFunc) Route {
	return Route{Pattern: pattern, Public: true, Handler: u.secure(h)}
}

// signed wraps p: it needs a live session, and a POST the session's CSRF token.
func (u *UI) signed(pattern, resource string, write bool, p page) Route {
	h := func(w http.ResponseWriter, r *http.Request) {
		sess, err := u.session(r)
		if err != nil {
			u.toSignIn(w, r)
			return
		}
		if r.Method != http.MethodGet {
			if err := checkCSRF(r, sess.CSRF); err != nil {
				u.fail(w, r, nil, err)
				return
			}
		}
		s := &signedIn{sess: sess, api: u.cfg.API(sess.By)}
		if err := p(w, r, s); err != nil {
			u.fail(w, r, s, err)
		}
	}
	return Route{Pattern: pattern, Resource: resource, Write: write, Handler: u.secure(h)}
}

// session reads the request's session cookie and looks it up.
func (u *UI) session(r *http.Request) (store.UISession, error) {
	for _, name := range []string{secureSessionCookie, sessionCookie} {
		if c, err := r.Cookie(name); err == nil {
			return u.cfg.Sessions.UISessionByID(r.Context(), c.Value)
		}
	}
	return store.UISession{}, errUnauthorized
}

// toSignIn sends a reader to the sign-in page, coming back here after; anything else that
// lacks a session is refused.
func (u *UI) toSignIn(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !acceptsPage(r) {
		u.fail(w, r, nil, errUnauthorized)
		return
	}
	http.Redirect(w, r, "/sign-in?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
}

// acceptsPage says whether r is a navigation that a redirect to the sign-in page helps: not
// an event stream's reconnect nor a program asking for JSON.
func acceptsPage(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	return !strings.HasPrefix(accept, "text/event-stream") && !strings.HasPrefix(accept, "application/json")
}

// statusError is an answer of the UI itself.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

var (
	errUnauthorized = &statusError{http.StatusUnauthorized, "sign in first"}
	errBadCSRF      = &statusError{http.StatusForbidden, "the form is stale or was not sent by this site: reload the page and try again"}
)

// checkCSRF refuses a state change whose form does not carry the session's CSRF token, or
// that another origin sent.
func checkCSRF(r *http.Request, want string) error {
	if origin := r.Header.Get("Origin"); origin != "" && !sameOrigin(r, origin) {
		return errBadCSRF
	}
	got := r.PostFormValue(csrfField)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errBadCSRF
	}
	return nil
}

// sameOrigin says whether origin is the host r was sent to.
func sameOrigin(r *http.Request, origin string) bool {
	o, err := url.Parse(origin)
	return err == nil && o.Host == r.Host
}

// fail answers err as a page: the API's own status (403 for what the role may not do) or the UI's.
func (u *UI) fail(w http.ResponseWriter, r *http.Request, s *signedIn, err error) {
	code, msg := http.StatusInternalServerError, "internal error"
	var se *statusError
	var ae *client.APIError
	var qe *client.QueuedError
	switch {
	case errors.As(err, &qe):
		code, msg = http.StatusAccepted, "The rack is paused for a transfer: the change is queued and applies when the pause ends."
	case errors.As(err, &se):
		code, msg = se.code, se.msg
	case errors.As(err, &ae) && ae.StatusCode >= 400 && !ae.Foreign:
		code, msg = ae.StatusCode, ae.Message // the API's own words, for the user
	case errors.Is(r.Context().Err(), context.Canceled):
		return
	default:
		u.log.Error("UI page failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	if code == http.StatusUnauthorized && r.Method == http.MethodGet && s != nil {
		u.toSignIn(w, r) // the token died under the session
		return
	}
	if !acceptsPage(r) {
		http.Error(w, msg, code)
		return
	}
	u.render(w, r, s, code, "error", map[string]any{"Code": code, "Status": http.StatusText(code), "Message": msg})
}

// secure sets the headers every answer of the UI carries: no script or style but the UI's
// own files, no framing, no referrer to other sites, no caching of pages.
func (u *UI) secure(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		// same-origin, not no-referrer: with no-referrer browsers send "Origin: null" on the
		// forms' posts, which the CSRF check refuses as another site's.
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		if !strings.HasPrefix(r.URL.Path, assetPrefix) {
			hd.Set("Cache-Control", "no-store")
		}
		h(w, r)
	})
}

// secureCookies says whether r's cookies are Secure (TLS, here or at a proxy in front).
func (u *UI) secureCookies(r *http.Request) bool { return r.TLS != nil || u.cfg.SecureCookies }
