package regionlink

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
)

// maxReplayBody is the largest request body Do buffers so it can resend it to another
// endpoint; larger bodies are streamed to one endpoint only.
const maxReplayBody = 4 << 20

// Do sends req to the current endpoint and, on a connection failure, to the others in
// preference order. Only req.URL's path and query are used; the endpoint supplies scheme, host
// and base path. Redirects are returned, not followed (a migrated machine's agent must see
// them). Requests that are not idempotent are resent only when the connection was never made.
func (l *Link) Do(req *http.Request) (*http.Response, error) {
	getBody, replayable, err := replayableBody(req)
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	var errs []error
	for _, base := range l.attemptOrder() {
		out := req.Clone(req.Context())
		out.URL = resolve(base, req.URL)
		out.Host = ""
		out.RequestURI = ""
		if getBody != nil {
			if out.Body, err = getBody(); err != nil {
				return nil, fmt.Errorf("request body: %w", err)
			}
			out.GetBody = nil
			if replayable {
				out.GetBody = getBody
			}
		}
		resp, err := l.transport.RoundTrip(out)
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", base, err))
		if req.Context().Err() != nil {
			break // the caller gave up; the region is not to blame
		}
		l.recordResult(base.String(), false)
		if !replayable || !(idempotent(req.Method) || neverConnected(err)) {
			break
		}
	}
	return nil, fmt.Errorf("region unreachable: %w", errors.Join(errs...))
}

// replayableBody returns a source of fresh request bodies (nil when there is no body) and
// whether the body can be sent more than once.
func replayableBody(req *http.Request) (func() (io.ReadCloser, error), bool, error) {
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		return nil, true, nil
	case req.GetBody != nil:
		return req.GetBody, true, nil
	}
	head, err := io.ReadAll(io.LimitReader(req.Body, maxReplayBody+1))
	if err != nil {
		return nil, false, err
	}
	if len(head) > maxReplayBody {
		streamed := struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), req.Body), req.Body}
		return func() (io.ReadCloser, error) { return streamed, nil }, false, nil
	}
	req.Body.Close()
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(head)), nil }, true, nil
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete, http.MethodTrace:
		return true
	}
	return false
}

// neverConnected reports a failure to establish the connection, so the request was not sent.
func neverConnected(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// resolve puts ref's path and query under the endpoint base, keeping ref's escaping.
func resolve(base, ref *url.URL) *url.URL {
	u := *base
	u.Path = base.Path + ref.Path
	u.RawPath = ""
	if ref.RawPath != "" {
		u.RawPath = base.EscapedPath() + ref.RawPath
	}
	u.RawQuery = ref.RawQuery
	u.Fragment = ""
	return &u
}
