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
)

// Client talks to one region endpoint. It is safe for concurrent use.
type Client struct {
	endpoint string // base URL without a trailing slash
	token    string
	http     *http.Client
	via      Doer // sends the requests instead of http when set (WithDoer)
	move     bool // send api.HeaderMove
}

// Doer sends one request and returns the answer without following redirects, like the
// rack's region link (*regionlink.Link), which fails over between region endpoints.
type Doer interface {
	Do(req *http.Request) (*http.Response, error)
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

// WithDoer sends every request through d, which supplies the region endpoint: with it the
// client's endpoint is "" and its requests carry only a path and a query.
func WithDoer(d Doer) Option {
	return func(c *Client) { c.via = d }
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

// Answer limits: the most bytes of an answer a call reads, by what the answer carries. A
// larger answer is an error, so a confused or hostile server cannot make a caller hold more.
const (
	// MaxErrorAnswer bounds an error document, and the text of an answer that is not one.
	MaxErrorAnswer = 64 << 10
	// MaxJSONAnswer bounds a JSON answer: an object, a page of up to api.MaxPageSize
	// objects, a result, a rack's config, an agent's job.
	MaxJSONAnswer = 64 << 20
	// MaxBundle bounds a migration bundle (a machine with its jobs and their logs, which a
	// region imports up to 256 MiB) and a rack bundle.
	MaxBundle = 256 << 20
	// MaxJobLog bounds a job's whole log: it migrates inside its machine's bundle.
	MaxJobLog = MaxBundle
	// MaxDNSAnswer bounds an answer of the region's DNS over HTTP, a zone transfer included.
	MaxDNSAnswer = 1 << 20
)

// Request is one call of the region API, the low-level form of every typed call of Client.
type Request struct {
	Method string
	Path   string // escaped, from the endpoint's root: api.PathPrefix+"/…" or "/healthz"
	Query  url.Values
	Header http.Header // sent besides Accept, Authorization and api.HeaderMove, replacing them
	// Body is sent JSON-encoded, unless it is a Raw; nil sends none.
	Body any
	// Limit is the most bytes of the answer read, one of the Max… constants; 0 is MaxJSONAnswer.
	Limit int64
}

// Raw is a request body sent as is.
type Raw struct {
	ContentType string
	Data        []byte
}

// Upload is a request body streamed from a reader, never held whole: Size bytes (-1 when
// unknown). It is sent once, so a region link does not fail it over mid-way.
type Upload struct {
	ContentType string
	Data        io.Reader
	Size        int64
}

// Answer is a 2xx answer, or a 304 to a conditional request, read whole.
type Answer struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// call performs r and decodes the answer into a T (*string answers are read as text).
func call[T any](ctx context.Context, c *Client, r Request) (T, error) {
	var out T
	a, err := c.Do(ctx, r)
	if err != nil {
		return out, err
	}
	return out, decodeAnswer(r, a, &out)
}

// callKey is call on /api/v1/{kind}/{key}[/rest...].
func callKey[T any](ctx context.Context, c *Client, method string, in any, kind, key string, rest ...string) (T, error) {
	return callAt[T](ctx, c, Request{Method: method, Body: in}, kind, key, rest...)
}

// callAt is call of r on /api/v1/{kind}/{key}[/rest...].
func callAt[T any](ctx context.Context, c *Client, r Request, kind, key string, rest ...string) (T, error) {
	path, err := keyPath(kind, key, rest...)
	if err != nil {
		var zero T
		return zero, err
	}
	r.Path = path
	return call[T](ctx, c, r)
}

// send is Do for calls whose answer carries nothing to read.
func (c *Client) send(ctx context.Context, r Request) error {
	_, err := c.Do(ctx, r)
	return err
}

// Do sends r to the region and reads its answer. A 307 is a *RedirectError (a migrated
// machine's stub), any other answer but 2xx and 304 an *APIError, a 202 to a write a
// *QueuedError, and an answer longer than r.Limit an error.
func (c *Client) Do(ctx context.Context, r Request) (Answer, error) {
	resp, err := c.roundTrip(ctx, r, c.http)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	limit := r.Limit
	if limit <= 0 {
		limit = MaxJSONAnswer
	}
	data, err := readUpTo(resp.Body, limit)
	if err != nil {
		return Answer{}, fmt.Errorf("%s %s: read answer: %w", r.Method, r.Path, err)
	}
	return Answer{StatusCode: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// Stream is a 2xx answer whose body the caller reads as it arrives, and closes.
type Stream struct {
	StatusCode    int
	Header        http.Header
	ContentLength int64 // -1 when unknown
	Body          io.ReadCloser
}

// DoStream is Do for an answer too large to hold (an image's bytes): the caller reads the
// body and closes it, and bounds the call with ctx, since the client's timeout of one
// request does not apply to it.
func (c *Client) DoStream(ctx context.Context, r Request) (Stream, error) {
	unbounded := *c.http
	unbounded.Timeout = 0
	resp, err := c.roundTrip(ctx, r, &unbounded)
	if err != nil {
		return Stream{}, err
	}
	return Stream{StatusCode: resp.StatusCode, Header: resp.Header, ContentLength: resp.ContentLength, Body: resp.Body}, nil
}

// roundTrip sends r through h (or the client's Doer) and returns a 2xx or 304 answer with
// its body unread; every other answer is its error, its body closed.
func (c *Client) roundTrip(ctx context.Context, r Request, h *http.Client) (*http.Response, error) {
	target := c.endpoint + r.Path
	if len(r.Query) > 0 {
		target += "?" + r.Query.Encode()
	}
	var body io.Reader
	contentType := ""
	contentLength := int64(-1)
	switch in := r.Body.(type) {
	case nil:
	case Raw:
		body, contentType = bytes.NewReader(in.Data), in.ContentType
	case Upload:
		body, contentType, contentLength = in.Data, in.ContentType, in.Size
	default:
		data, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode request: %w", r.Method, r.Path, err)
		}
		body, contentType = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, target, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.Method, r.Path, err)
	}
	if contentLength >= 0 {
		req.ContentLength = contentLength
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
	for name, values := range r.Header {
		req.Header[http.CanonicalHeaderKey(name)] = values
	}
	send := h.Do
	if c.via != nil {
		send = c.via.Do
	}
	resp, err := send(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.Method, target, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotModified:
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		defer resp.Body.Close()
		return nil, decodeFailure(resp)
	case resp.StatusCode == http.StatusAccepted && r.Method != http.MethodGet:
		defer resp.Body.Close()
		return nil, decodeQueued(resp)
	}
	return resp, nil
}

// readUpTo reads body whole, refusing one longer than limit bytes.
func readUpTo(body io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("answer longer than %d bytes", limit)
	}
	return data, nil
}

// decodeAnswer decodes the answer to r into out: text for a *string, JSON otherwise.
func decodeAnswer(r Request, a Answer, out any) error {
	if text, ok := out.(*string); ok {
		*text = string(a.Body)
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(a.Body))
	// Numbers inside Params keep their exact text, so a migrated param is not rounded
	// through float64.
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", r.Method, r.Path, err)
	}
	return nil
}

// decodeFailure turns a non-2xx answer into *RedirectError or *APIError.
func decodeFailure(resp *http.Response) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxErrorAnswer))
	if err != nil {
		return fmt.Errorf("read HTTP %d answer: %w", resp.StatusCode, err)
	}
	if resp.StatusCode == http.StatusTemporaryRedirect {
		var r api.Redirect
		_ = json.Unmarshal(data, &r) // a missing body still leaves the Location header
		if r.Endpoint == "" {
			r.Endpoint = origin(resp.Header.Get("Location"))
		}
		return &RedirectError{Endpoint: r.Endpoint, Machine: r.Machine}
	}
	var e api.Error
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return &APIError{StatusCode: resp.StatusCode, Message: e.Error, Reason: e.Reason}
	}
	msg := strings.TrimSpace(string(data))
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &APIError{StatusCode: resp.StatusCode, Message: msg, Foreign: true}
}

// origin is the scheme and host of an absolute URL, the endpoint it names; "" for anything else.
func origin(location string) string {
	u, err := url.Parse(location)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// decodeQueued turns the 202 answer to a write held for a paused rack into *QueuedError.
func decodeQueued(resp *http.Response) error {
	var q api.QueuedWrite
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxErrorAnswer)).Decode(&q); err != nil {
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
	// Reason is the region's api.Error.Reason, "" when it gave none.
	Reason string
}

// StaleAttempt reports a step refused because a newer attempt of its migration acted on the
// machine (api.ReasonStaleAttempt): the attempt that sent it must leave the machine alone.
func (e *APIError) StaleAttempt() bool { return e.Reason == api.ReasonStaleAttempt }

func (e *APIError) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Message, e.StatusCode) }

// Permanent reports a refusal that sending the same request again cannot change: a 4xx
// answer but 408 and 429, which ask the caller to come back later.
func (e *APIError) Permanent() bool {
	return e.StatusCode >= 400 && e.StatusCode < 500 &&
		e.StatusCode != http.StatusRequestTimeout && e.StatusCode != http.StatusTooManyRequests
}

// RedirectError is a 307 answer: the machine now lives at Endpoint (see api.Redirect).
type RedirectError struct {
	Endpoint string
	Machine  string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("machine %s has moved to %s", e.Machine, e.Endpoint)
}
