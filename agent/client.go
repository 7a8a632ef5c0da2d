package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/ironflow/ironflow/internal/backoff"
	"github.com/ironflow/ironflow/region/api"
)

// errMoved means the region answered that the machine migrated; the agent has repointed its
// config and must check in at the new endpoint.
var errMoved = errors.New("machine migrated to another endpoint")

// apiError is a 4xx answer: retrying the same request will not help.
type apiError struct {
	Code    int
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("agent API: %d: %s", e.Code, e.Message) }

// request is one agent API call, relative to /api/v1/agent/{uuid}.
type request struct {
	method  string
	path    string
	body    []byte
	bodyFor func(endpoint string) []byte // when set, the body depends on the endpoint tried
	ctype   string
	timeout time.Duration
}

// Backoff bounds the exponential wait between failed attempts.
type Backoff struct {
	Min, Max time.Duration
}

// start returns the waits of one retry loop: from Min, doubling up to Max, with jitter so
// many agents of a failed region do not come back in lockstep.
func (b Backoff) start() *backoff.Backoff {
	return &backoff.Backoff{Initial: b.Min, Max: b.Max, Jitter: true}
}

// call sends req, failing over between the configured endpoints and backing off on network
// errors and 5xx answers until it gets an answer or ctx ends. It returns the body of a 2xx
// answer (nil for 204), errMoved after following a migration redirect, or *apiError.
func (a *Agent) call(ctx context.Context, req request) ([]byte, error) {
	wait := a.opts.Backoff.start()
	for {
		ep := a.endpoint()
		status, body, hdr, err := a.roundTrip(ctx, ep, req)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			a.log.Warn("agent API unreachable", "endpoint", ep, "path", req.path, "error", err)
		case status == http.StatusTemporaryRedirect:
			if err := a.follow(ep, body, hdr); err != nil {
				a.log.Error("agent API: unusable redirect", "endpoint", ep, "error", err)
				break
			}
			return nil, errMoved
		case status >= 500 || status == http.StatusTooManyRequests:
			a.log.Warn("agent API failing", "endpoint", ep, "path", req.path, "status", status)
		case status >= 300:
			var e api.Error
			if json.Unmarshal(body, &e) != nil || e.Error == "" {
				e.Error = string(body)
			}
			return nil, &apiError{Code: status, Message: e.Error}
		default:
			return body, nil
		}
		a.failover(ep)
		if err := backoff.Sleep(ctx, wait.Next()); err != nil {
			return nil, err
		}
	}
}

func (a *Agent) roundTrip(ctx context.Context, endpoint string, req request) (int, []byte, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, req.timeout)
	defer cancel()
	u := endpoint + api.PathPrefix + "/agent/" + url.PathEscape(a.machine()) + req.path
	data := req.body
	if req.bodyFor != nil {
		data = req.bodyFor(endpoint)
	}
	var body io.Reader
	if data != nil {
		body = bytes.NewReader(data)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, body)
	if err != nil {
		return 0, nil, nil, err
	}
	hr.Header.Set("Authorization", a.authorization())
	if req.ctype != "" {
		hr.Header.Set("Content-Type", req.ctype)
	}
	resp, err := a.http.Do(hr)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("read answer: %w", err)
	}
	return resp.StatusCode, answer, resp.Header, nil
}

// callJSON sends req and decodes a 200 answer into out; it reports whether there was a body
// (false for 204).
func (a *Agent) callJSON(ctx context.Context, req request, out any) (bool, error) {
	data, err := a.call(ctx, req)
	if err != nil || len(data) == 0 {
		return false, err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return false, fmt.Errorf("agent API %s %s: decode answer: %w", req.method, req.path, err)
	}
	return true, nil
}

// mustJSON encodes the agent API's own wire types, which always encode.
func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("agent: encode %T: %v", v, err))
	}
	return data
}

// callFollowing is call for requests that belong to a job already taken: after a migration
// redirect the same request goes to the new endpoint, which holds the imported job.
func (a *Agent) callFollowing(ctx context.Context, req request) ([]byte, error) {
	const maxMoves = 3 // a redirect cycle between regions must not spin forever
	for moves := 0; ; moves++ {
		body, err := a.call(ctx, req)
		if !errors.Is(err, errMoved) || moves == maxMoves {
			return body, err
		}
	}
}

// redirectEndpoint reads where a 307 sends the machine: the Redirect body, or the origin of
// the Location header when the body names none.
func redirectEndpoint(body []byte, hdr http.Header) (api.Redirect, error) {
	var r api.Redirect
	if len(body) > 0 {
		if err := json.Unmarshal(body, &r); err != nil {
			return r, fmt.Errorf("redirect body: %w", err)
		}
	}
	if r.Endpoint == "" {
		loc, err := url.Parse(hdr.Get("Location"))
		if err != nil || loc.Scheme == "" || loc.Host == "" {
			return r, fmt.Errorf("redirect names no endpoint (Location %q)", hdr.Get("Location"))
		}
		r.Endpoint = loc.Scheme + "://" + loc.Host
	}
	return r, ValidateEndpoint(r.Endpoint)
}
