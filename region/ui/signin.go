package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/ironflow/ironflow/region/store"
)

// signInPage shows the form. Its CSRF value is also set as a cookie (double submit), so a
// sign-in another site posts, which would plant its own session, is refused.
func (u *UI) signInPage(w http.ResponseWriter, r *http.Request) {
	u.showSignIn(w, r, http.StatusOK, "")
}

func (u *UI) showSignIn(w http.ResponseWriter, r *http.Request, code int, problem string) {
	// One value per browser: a second load of the page (a reload, another tab) keeps the
	// forms it already shows valid.
	value := rand.Text()
	if c, err := r.Cookie(signInCookie); err == nil && len(c.Value) == len(value) {
		value = c.Value
	}
	http.SetCookie(w, &http.Cookie{Name: signInCookie, Value: value, Path: "/sign-in", HttpOnly: true,
		Secure: u.secureCookies(r), SameSite: http.SameSiteStrictMode, MaxAge: 3600})
	u.render(w, r, nil, code, "signin", map[string]any{"CSRF": value, "Next": safeNext(r.FormValue("next")), "Problem": problem})
}

// signIn exchanges an API token for a new session and goes on to next (a path of this site only).
func (u *UI) signIn(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(signInCookie)
	sent := r.PostFormValue(csrfField)
	if err != nil || sent == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(sent)) != 1 ||
		r.Header.Get("Origin") != "" && !sameOrigin(r, r.Header.Get("Origin")) {
		u.showSignIn(w, r, http.StatusForbidden, errBadCSRF.msg)
		return
	}
	// A session cookie the browser already holds is never reused: a new session every time.
	sess, err := u.cfg.Sessions.CreateUISession(r.Context(), strings.TrimSpace(r.PostFormValue("token")), u.cfg.SessionTTL)
	if errors.Is(err, store.ErrUnauthorized) {
		u.showSignIn(w, r, http.StatusUnauthorized, "That token is unknown or has expired.")
		return
	}
	if err != nil {
		u.fail(w, r, nil, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: signInCookie, Path: "/sign-in", MaxAge: -1})
	u.setSessionCookie(w, r, sess)
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

// signOut ends the session (CSRF-checked like every state change).
func (u *UI) signOut(w http.ResponseWriter, r *http.Request, s *signedIn) error {
	if err := u.cfg.Sessions.DeleteUISession(r.Context(), s.sess.ID); err != nil {
		return err
	}
	c := u.sessionCookie(r, "", 0)
	c.MaxAge = -1
	http.SetCookie(w, c)
	http.Redirect(w, r, "/sign-in", http.StatusSeeOther)
	return nil
}

// setSessionCookie sets the cookie of sess, living as long as the session.
func (u *UI) setSessionCookie(w http.ResponseWriter, r *http.Request, sess store.UISession) {
	c := u.sessionCookie(r, sess.ID, 0)
	c.Expires = sess.Expires
	http.SetCookie(w, c)
}

func (u *UI) sessionCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	name := sessionCookie
	if u.secureCookies(r) {
		name = secureSessionCookie
	}
	return &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, Secure: u.secureCookies(r),
		SameSite: http.SameSiteStrictMode, MaxAge: maxAge}
}

// safeNext is where to go after signing in: a path of this site, never another host
// (//host, /\host, a scheme), else the machines page.
func safeNext(next string) string {
	const home = "/machines"
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") {
		return home
	}
	p, err := url.Parse(next)
	if err != nil || p.Scheme != "" || p.Host != "" || p.User != nil {
		return home
	}
	return p.RequestURI()
}
