// Package client is the typed Go client of the region API (region/api/routes.go).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// Default timeouts: a region answers every call from PostgreSQL, so anything slower than
// this is a stuck connection rather than a slow query.
const (
	DefaultTimeout     = 30 * time.Second
	defaultDialTimeout = 5 * time.Second
	maxErrorBody       = 64 << 10
)

// Client talks to one region endpoint. It is safe for concurrent use.
type Client struct {
	endpoint string // base URL without a trailing slash
	token    string
	http     *http.Client
	move     bool // send api.HeaderMove
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces the HTTP client (for custom TLS or transports). The client's
// redirect policy is overridden so that 307 answers reach the caller as *RedirectError.
func WithHTTPClient(h *http.Client) Option {
	return func(c *Client) {
		copied := *h
		c.http = &copied
	}
}

// AsMove marks every write of the client as part of a move (api.HeaderMove): the workers'
// calls, which must not wait for the pause of a rack that their own move holds.
func AsMove() Option {
	return func(c *Client) { c.move = true }
}

// WithTimeout sets the overall timeout of one request (0 disables it).
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.http.Timeout = d }
}

// sharedTransport pools connections across every Client, so code that builds a client per
// call (activities) does not leave idle connections behind.
var sharedTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: defaultDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = defaultDialTimeout
	t.ResponseHeaderTimeout = DefaultTimeout // guards stuck servers even when WithTimeout(0)
	return t
}()

// New returns a client for the region at endpoint (e.g. "http://127.0.0.1:5240")
// authenticating with token ("" sends no Authorization header).
func New(endpoint, token string, opts ...Option) *Client {
	c := &Client{
		endpoint: strings.TrimRight(endpoint, "/"),
		token:    token,
		http:     &http.Client{Transport: sharedTransport, Timeout: DefaultTimeout},
	}
	for _, opt := range opts {
		opt(c)
	}
	// Redirects carry migration semantics (a stubbed machine); callers decide what to do.
	c.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// apiPath joins escaped path segments under /api/v1. Each segment is escaped on its own so
// keys such as "Name:birdy" or "Name:a/b" stay one segment.
func apiPath(segments ...string) string {
	var b strings.Builder
	b.WriteString(api.PathPrefix)
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// keyPath is apiPath for an object key, refusing an empty key that would address the collection.
func keyPath(kind, key string, rest ...string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%s: empty key", kind)
	}
	return apiPath(append([]string{kind, key}, rest...)...), nil
}

// call performs r and decodes the answer into a T (*string answers are read as text).
func call[T any](ctx context.Context, c *Client, r request) (T, error) {
	var out T
	r.out = &out
	err := c.do(ctx, r)
	return out, err
}

// callKey is call on /api/v1/{kind}/{key}[/rest...].
func callKey[T any](ctx context.Context, c *Client, method string, in any, kind, key string, rest ...string) (T, error) {
	path, err := keyPath(kind, key, rest...)
	if err != nil {
		var zero T
		return zero, err
	}
	return call[T](ctx, c, request{method: method, path: path, in: in})
}

// request describes one API call. in is JSON-encoded unless it is a rawBody.
type request struct {
	method string
	path   string // already escaped
	query  url.Values
	header http.Header // sent besides the defaults
	in     any
	out    any // *string receives the body as text, other pointers are JSON-decoded
	// answered receives the answer's header when set.
	answered *http.Header
}

// rawBody is sent as is with its content type.
type rawBody struct {
	contentType string
	data        []byte
}

func (c *Client) do(ctx context.Context, r request) error {
	target := c.endpoint + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	contentType := ""
	switch in := r.in.(type) {
	case nil:
	case rawBody:
		body, contentType = bytes.NewReader(in.data), in.contentType
	default:
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode request: %w", r.method, r.path, err)
		}
		body, contentType = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.move {
		req.Header.Set(api.HeaderMove, "1")
	}
	for name, values := range r.header {
		req.Header[name] = values
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", r.method, target, err)
	}
	defer resp.Body.Close()
	if r.answered != nil {
		*r.answered = resp.Header
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeFailure(resp)
	}
	if resp.StatusCode == http.StatusAccepted && r.method != http.MethodGet {
		return decodeQueued(resp)
	}
	if err := decodeBody(resp.Body, r.out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", r.method, r.path, err)
	}
	return nil
}

func decodeBody(body io.Reader, out any) error {
	switch out := out.(type) {
	case nil:
		_, err := io.Copy(io.Discard, body)
		return err
	case *string:
		data, err := io.ReadAll(body)
		*out = string(data)
		return err
	default:
		dec := json.NewDecoder(body)
		// Numbers inside Params keep their exact text, so a migrated param is not rounded
		// through float64.
		dec.UseNumber()
		return dec.Decode(out)
	}
}

// decodeFailure turns a non-2xx answer into *RedirectError or *APIError.
func decodeFailure(resp *http.Response) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return fmt.Errorf("read HTTP %d answer: %w", resp.StatusCode, err)
	}
	if resp.StatusCode == http.StatusTemporaryRedirect {
		var r api.Redirect
		_ = json.Unmarshal(data, &r) // a missing body still leaves the Location header
		if r.Endpoint == "" {
			r.Endpoint = resp.Header.Get("Location")
		}
		return &RedirectError{Endpoint: r.Endpoint, Machine: r.Machine}
	}
	var e api.Error
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return &APIError{StatusCode: resp.StatusCode, Message: e.Error}
	}
	msg := strings.TrimSpace(string(data))
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &APIError{StatusCode: resp.StatusCode, Message: msg, Foreign: true}
}

// decodeQueued turns the 202 answer to a write held for a paused rack into *QueuedError.
func decodeQueued(resp *http.Response) error {
	var q api.QueuedWrite
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&q); err != nil {
		return fmt.Errorf("read HTTP 202 answer: %w", err)
	}
	return &QueuedError{Queued: q, Location: resp.Header.Get("Location")}
}

// QueuedError is a 202 answer: the write was accepted but not applied, since it touches a
// rack paused for a transfer; it is replayed when the pause ends. It is an error so that
// no caller takes the write for done, and not a failure: the CLI exits 0 on it.
type QueuedError struct {
	Queued   api.QueuedWrite
	Location string // the queued operation
}

func (e *QueuedError) Error() string {
	q := e.Queued
	if q.Transfer.IsZero() {
		return fmt.Sprintf("queued until the pause of rack %s ends: operation %d", q.RackName, q.Operation.ID)
	}
	return fmt.Sprintf("queued until the rack transfer of %s (%s, %s→%s) finishes: operation %d", q.RackName, q.Transfer.Transfer, q.Transfer.From, q.Transfer.To, q.Operation.ID)
}

// APIError is a non-2xx answer of the region; Message comes from the {"Error","Code"} body.
type APIError struct {
	StatusCode int
	Message    string
	// Foreign is set when the body was not a region's error document: the answer may come
	// from a proxy, or from a server that is not an Ironflow region at all.
	Foreign bool
}

func (e *APIError) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Message, e.StatusCode) }

// RedirectError is a 307 answer: the machine now lives at Endpoint (see api.Redirect).
type RedirectError struct {
	Endpoint string
	Machine  string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("machine %s has moved to %s", e.Machine, e.Endpoint)
}
