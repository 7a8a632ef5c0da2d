package rack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"

	"github.com/ironflow/ironflow/rack/dns"
	"github.com/ironflow/ironflow/rack/leases"
	"github.com/ironflow/ironflow/rack/syslog"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
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

// regionAPI makes the rack's calls of the region API (region/api/rack.go) through the region
// link, so they fail over like everything else, with the rack's token.
type regionAPI struct {
	link Region
	rack string // rack UUID
}

// region is the client of the rack's own calls; each is made with asRack(ctx), so it carries
// the rack's token.
func (r regionAPI) region() *client.Client {
	return client.New("", "", client.WithDoer(r.link))
}

// Enlist implements httpboot.Enlister: the rack forwards a booting machine's report.
func (r regionAPI) Enlist(ctx context.Context, e api.Enlistment) (api.EnlistResult, error) {
	res, err := r.region().Enlist(asRack(ctx), e)
	return res, forwardedAnswer(err)
}

// CommissioningScripts implements httpboot.Enlister.
func (r regionAPI) CommissioningScripts(ctx context.Context) ([]api.CommissioningScript, error) {
	scripts, err := r.region().CommissioningScripts().List(asRack(ctx), url.Values{"limit": {strconv.Itoa(api.MaxCommissioning)}})
	return scripts, forwardedAnswer(err)
}

// regionAnswer is the region's answer to an enlistment the rack forwards, which the rack
// passes on to the machine with its status (httpboot.StatusCoder).
type regionAnswer struct{ *client.APIError }

func (e regionAnswer) StatusCode() int { return e.APIError.StatusCode }

func (e regionAnswer) Unwrap() error { return e.APIError }

// forwardedAnswer makes an *client.APIError of err a regionAnswer.
func forwardedAnswer(err error) error {
	if apiErr, ok := errors.AsType[*client.APIError](err); ok {
		return regionAnswer{apiErr}
	}
	return err
}

// heartbeat reports the rack's health to the region.
func (r regionAPI) heartbeat(ctx context.Context, hb api.RackHeartbeat) error {
	_, err := r.region().RackHeartbeat(asRack(ctx), r.rack, hb)
	return err
}

// SyncLeases implements leases.Syncer: one POST per batch, a refusal of its content marked
// leases.ErrBatchRefused.
func (r regionAPI) SyncLeases(ctx context.Context, batch []api.Lease) (api.LeaseSyncResult, error) {
	res, err := r.region().SyncLeases(asRack(ctx), r.rack, batch)
	return res, markRefusal(err, leases.ErrBatchRefused)
}

// PostSyslog implements syslog.Poster: one POST per batch, a refusal of its content marked
// syslog.ErrBatchRefused.
func (r regionAPI) PostSyslog(ctx context.Context, batch []api.SyslogMessage) (api.SyslogSyncResult, error) {
	res, err := r.region().PostSyslog(asRack(ctx), r.rack, batch)
	return res, markRefusal(err, syslog.ErrBatchRefused)
}

// markRefusal wraps err in refused when the region refused a batch for its content: a 400,
// 409, 413, 422 or 500 (the region answers 503 when its database is down, 401/403/404 when it
// does not know or trust the rack).
func markRefusal(err, refused error) error {
	if apiErr, ok := errors.AsType[*client.APIError](err); ok {
		switch apiErr.StatusCode {
		case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge,
			http.StatusUnprocessableEntity, http.StatusInternalServerError:
			return fmt.Errorf("%w: %w", refused, err)
		}
	}
	return err
}
