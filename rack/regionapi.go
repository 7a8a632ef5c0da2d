package rack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/ironflow/ironflow/rack/dns"
	"github.com/ironflow/ironflow/rack/leases"
	"github.com/ironflow/ironflow/rack/syslog"
	"github.com/ironflow/ironflow/region/api"
)

// rackAuth adds the rack's token to the requests the rack makes on its own behalf (marked
// with asRack). Proxied machine requests share the region link but are not marked, so a
// machine never borrows the rack's authority. The token changes when the rack moves region.
type rackAuth struct {
	base  http.RoundTripper
	token atomic.Pointer[string]
}

type rackCallKey struct{}

// asRack marks ctx so that requests made with it carry the rack's token.
func asRack(ctx context.Context) context.Context {
	return context.WithValue(ctx, rackCallKey{}, true)
}

func newRackAuth(token string) *rackAuth {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = dns.RegionConns
	a := &rackAuth{base: base}
	a.token.Store(&token)
	return a
}

func (a *rackAuth) setToken(token string) { a.token.Store(&token) }

func (a *rackAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Context().Value(rackCallKey{}) != nil {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+*a.token.Load())
	}
	return a.base.RoundTrip(req)
}

// Region is the region link as the rack's own calls use it (*regionlink.Link).
type Region interface {
	Do(req *http.Request) (*http.Response, error)
	Current() *url.URL
}

// regionAPI makes the rack's calls of the rack API (region/api/rack.go) through the region
// link, so they fail over like everything else.
type regionAPI struct {
	link Region
	rack string // rack UUID
}

// post sends in as JSON to the rack's path and decodes the answer into out.
func (r regionAPI) post(ctx context.Context, path string, in, out any) error {
	return r.call(ctx, http.MethodPost, api.PathPrefix+"/racks/"+r.rack+path, in, out)
}

// call sends in (if not nil) as JSON to path with the rack's token and decodes a 2xx answer
// into out (if not nil).
func (r regionAPI) call(ctx context.Context, method, full string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s: %w", full, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(asRack(ctx), method, "", body)
	if err != nil {
		return err
	}
	path, query, _ := strings.Cut(full, "?")
	req.URL = &url.URL{Path: path, RawQuery: query}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.link.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, full, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, full, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e api.Error
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = string(bytes.TrimSpace(data[:min(len(data), 512)]))
		}
		return &statusError{method: method, path: full, status: resp.Status, code: resp.StatusCode, msg: e.Error}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, full, err)
	}
	return nil
}

// Enlist implements httpboot.Enlister: the rack forwards a booting machine's report.
func (r regionAPI) Enlist(ctx context.Context, e api.Enlistment) (api.EnlistResult, error) {
	var res api.EnlistResult
	return res, r.call(ctx, http.MethodPost, api.PathPrefix+"/enlist", e, &res)
}

// CommissioningScripts implements httpboot.Enlister.
func (r regionAPI) CommissioningScripts(ctx context.Context) ([]api.CommissioningScript, error) {
	scripts := []api.CommissioningScript{}
	return scripts, r.call(ctx, http.MethodGet, api.PathPrefix+"/"+api.KindCommissioningScripts+"?limit="+strconv.Itoa(api.MaxCommissioning), nil, &scripts)
}

// heartbeat reports the rack's health to the region.
func (r regionAPI) heartbeat(ctx context.Context, hb api.RackHeartbeat) error {
	var rack api.Rack
	return r.post(ctx, "/heartbeat", hb, &rack)
}

// statusError is a region's answer other than 200 to one of the rack's calls.
type statusError struct {
	method, path, status, msg string
	code                      int
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: %s: %s", e.method, e.path, e.status, e.msg)
}

// StatusCode implements httpboot.StatusCoder.
func (e *statusError) StatusCode() int { return e.code }

// SyncLeases implements leases.Syncer: one POST per batch. A 400, 409, 413, 422 or 500 is
// about the batch's content (the region answers 503 when its database is down, 401/403/404
// when it does not know or trust the rack), so it is marked leases.ErrBatchRefused.
func (r regionAPI) SyncLeases(ctx context.Context, batch []api.Lease) (api.LeaseSyncResult, error) {
	var res api.LeaseSyncResult
	return res, markRefusal(r.post(ctx, "/leases", batch, &res), leases.ErrBatchRefused)
}

// PostSyslog implements syslog.Poster: one POST per batch, a refusal of its content marked
// syslog.ErrBatchRefused.
func (r regionAPI) PostSyslog(ctx context.Context, batch []api.SyslogMessage) (api.SyslogSyncResult, error) {
	var res api.SyslogSyncResult
	return res, markRefusal(r.post(ctx, "/syslog", batch, &res), syslog.ErrBatchRefused)
}

// markRefusal wraps err in refused when the region refused a batch for its content: a 400,
// 409, 413, 422 or 500 (the region answers 503 when its database is down, 401/403/404 when it
// does not know or trust the rack).
func markRefusal(err, refused error) error {
	var se *statusError
	if errors.As(err, &se) {
		switch se.code {
		case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge,
			http.StatusUnprocessableEntity, http.StatusInternalServerError:
			return fmt.Errorf("%w: %w", refused, err)
		}
	}
	return err
}
