package server

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/region/store"
	"github.com/ironflow/ironflow/region/ui"
)

// mountUI serves the web UI's routes on the API's mux. The UI calls the API in process as
// the session's principal (inProcess), so each of its pages and actions meets the routes'
// own permission checks, and no token leaves the session store.
func (s *Server) mountUI() {
	u, err := ui.New(ui.Config{
		Sessions: s.st,
		API: func(by store.Principal) *client.Client {
			return client.New("", "", client.WithDoer(inProcess{s: s, by: by}))
		},
		May:           func(role, resource string, write bool) bool { return authorize(role, resource, write) == granted },
		Transfers:     s.cfg.UITransfers,
		TemporalUI:    s.cfg.TemporalUI,
		SecureCookies: s.cfg.SecureCookies,
		Logger:        s.log,
	})
	if err != nil {
		panic(fmt.Sprintf("region UI: %v", err)) // the templates are embedded: a broken build
	}
	for _, rt := range u.Routes() {
		s.patterns[rt.Pattern] = true
		s.uiTable = append(s.uiTable, rt)
		s.mux.Handle(rt.Pattern, rt.Handler)
	}
}

// UIRoutes lists the web UI's routes (none when the UI is off), for the abuse suite.
func (s *Server) UIRoutes() []ui.Route { return s.uiTable }

type signedInKey struct{}

// signedInAs returns the principal a UI session acts as, set only by inProcess.
func signedInAs(ctx context.Context) (store.Principal, bool) {
	by, ok := ctx.Value(signedInKey{}).(store.Principal)
	return by, ok
}

// inProcess sends the UI's API calls through the server's own handler as by.
type inProcess struct {
	s  *Server
	by store.Principal
}

func (d inProcess) Do(req *http.Request) (*http.Response, error) {
	req = req.WithContext(context.WithValue(req.Context(), signedInKey{}, d.by))
	rec := &answerRecorder{}
	d.s.serveHTTP(rec, req)
	code := rec.code
	if code == 0 {
		code = http.StatusOK
	}
	return &http.Response{StatusCode: code, Header: rec.Header(), Body: io.NopCloser(&rec.body), Request: req}, nil
}
