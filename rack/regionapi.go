package rack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"

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
	a := &rackAuth{base: http.DefaultTransport.(*http.Transport).Clone()}
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
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	full := api.PathPrefix + "/racks/" + r.rack + path
	req, err := http.NewRequestWithContext(asRack(ctx), http.MethodPost, "", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.URL = &url.URL{Path: full}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.link.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", full, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("POST %s: %w", full, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e api.Error
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = string(bytes.TrimSpace(data[:min(len(data), 512)]))
		}
		return fmt.Errorf("POST %s: %s: %s", full, resp.Status, e.Error)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("POST %s: decode answer: %w", full, err)
	}
	return nil
}

// heartbeat reports the rack's health to the region.
func (r regionAPI) heartbeat(ctx context.Context, hb api.RackHeartbeat) error {
	var rack api.Rack
	return r.post(ctx, "/heartbeat", hb, &rack)
}

// SyncLeases implements leases.Syncer: one POST per batch.
func (r regionAPI) SyncLeases(ctx context.Context, batch []api.Lease) error {
	var res api.LeaseSyncResult
	return r.post(ctx, "/leases", batch, &res)
}
