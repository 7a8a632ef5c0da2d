package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/ironflow/ironflow/internal/backoff"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// errMoved means the region answered that the machine migrated; the agent has repointed its
// config and must check in at the new endpoint.
var errMoved = errors.New("machine migrated to another endpoint")

// request is one agent API call, relative to /api/v1/agent/{uuid}.
type request struct {
	method  string
	path    string
	query   url.Values
	body    any                       // JSON-encoded, or a client.Raw
	bodyFor func(endpoint string) any // when set, the body depends on the endpoint tried
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
// errors and on answers worth sending again (5xx, 408, 429) until it gets an answer or ctx
// ends. It returns the body of a 2xx answer (empty for 204), errMoved after following a
// migration redirect, or a permanent *client.APIError.
func (a *Agent) call(ctx context.Context, req request) ([]byte, error) {
	wait := a.opts.Backoff.start()
	for {
		ep := a.endpoint()
		body, err := a.roundTrip(ctx, ep, req)
		redirect, moved := errors.AsType[*client.RedirectError](err)
		answer, answered := errors.AsType[*client.APIError](err)
		switch {
		case err == nil:
			return body, nil
		case moved:
			if err := a.follow(ep, redirect); err != nil {
				a.log.Error("agent API: unusable redirect", "endpoint", ep, "error", err)
				break
			}
			return nil, errMoved
		case answered && answer.Permanent():
			return nil, fmt.Errorf("agent API %s %s: %w", req.method, req.path, err)
		case answered:
			a.log.Warn("agent API failing", "endpoint", ep, "path", req.path, "status", answer.StatusCode)
		case ctx.Err() != nil:
			return nil, ctx.Err()
		default:
			a.log.Warn("agent API unreachable", "endpoint", ep, "path", req.path, "error", err)
		}
		a.failover(ep)
		if err := backoff.Sleep(ctx, wait.Next()); err != nil {
			return nil, err
		}
	}
}

// roundTrip sends req to one endpoint with the machine's credential.
func (a *Agent) roundTrip(ctx context.Context, endpoint string, req request) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, req.timeout)
	defer cancel()
	body := req.body
	if req.bodyFor != nil {
		body = req.bodyFor(endpoint)
	}
	region := client.New(endpoint, a.credential(), client.WithHTTPClient(a.http))
	answer, err := region.Do(ctx, client.Request{
		Method: req.method,
		Path:   api.PathPrefix + "/agent/" + url.PathEscape(a.machine()) + req.path,
		Query:  req.query,
		Body:   body,
	})
	return answer.Body, err
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

// redirectEndpoint checks where a 307 sends the machine: the endpoint its Redirect body names,
// or the origin of its Location header.
func redirectEndpoint(r *client.RedirectError) error {
	if r.Endpoint == "" {
		return errors.New("redirect names no endpoint")
	}
	return ValidateEndpoint(r.Endpoint)
}
