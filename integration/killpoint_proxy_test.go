package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// call is the signature of one HTTP request a step of a workflow makes to a region: the
// region it goes to, its method and path, and optionally a string its body must contain.
type call struct {
	region, method, path string
	bodyHas              string
}

func (c call) String() string { return c.method + " " + c.region + c.path }

// trap holds the first request matching the last of its calls, once the earlier calls have
// passed in order. While it holds, the workflow is exactly at that step boundary: the step's
// activity runs, the region has not seen the call.
type trap struct {
	calls []call

	mu        sync.Mutex
	seen      int
	held      chan struct{} // closed when a request is held
	release   chan struct{} // closed to let it through
	abandoned chan struct{} // closed when the held request's client gave up (worker killed, cancelled)
	answered  chan struct{} // closed when the region answered the held request
	once      sync.Once
	// beforeNextChange, once set, lets the held request go when the next state-changing
	// request reaches a region, which waits for the held one's answer (releaseBeforeNextChange).
	beforeNextChange bool
}

func newTrap(calls ...call) *trap {
	return &trap{calls: calls, held: make(chan struct{}), release: make(chan struct{}), abandoned: make(chan struct{}), answered: make(chan struct{})}
}

// settled waits up to d for the held request to be answered or abandoned, so the checks
// after a run see what a request released late did to the region.
func (t *trap) settled(d time.Duration) {
	if !t.isHeld() {
		return
	}
	select {
	case <-t.answered:
	case <-t.abandoned:
	case <-time.After(d):
	}
}

// observe records a request and reports whether it is the one to hold.
func (t *trap) observe(region string, r *http.Request) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == len(t.calls) || !t.calls[t.seen].matches(region, r) {
		return false
	}
	t.seen++
	if t.seen < len(t.calls) {
		return false
	}
	close(t.held)
	return true
}

// releaseBeforeNextChange arms the trap to let its held request go when the next
// state-changing request (not a GET) reaches a region, and to serve that request only once
// the held one was answered: the held step lands just after the move's next change, e.g.
// after a cancel's undos began.
func (t *trap) releaseBeforeNextChange() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.beforeNextChange = true
}

// changeArrived reports the request releaseBeforeNextChange waits for, once.
func (t *trap) changeArrived(r *http.Request) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.beforeNextChange || r.Method == http.MethodGet {
		return false
	}
	t.beforeNextChange = false
	return true
}

// Release lets the held request (and every later one) through; safe to call more than once.
func (t *trap) Release() { t.once.Do(func() { close(t.release) }) }

func (t *trap) isHeld() bool {
	select {
	case <-t.held:
		return true
	default:
		return false
	}
}

func (c call) matches(region string, r *http.Request) bool {
	if c.region != region || c.method != r.Method || c.path != r.URL.Path {
		return false
	}
	if c.bodyHas == "" {
		return true
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	return err == nil && bytes.Contains(body, []byte(c.bodyHas))
}

// regionProxy is a reverse proxy in front of one region for the worker (its regions file
// names the proxies), able to hold the request a trap picks. It rewrites the region's info so
// the cluster endpoints it announces are the proxy: a rack moved by a transfer then registers
// with the target through it, and that registration can be held too.
type regionProxy struct {
	region string
	srv    *httptest.Server
	rp     *httputil.ReverseProxy
	box    *trapBox
}

// trapBox is the one trap armed at a time, shared by the proxies of all regions.
type trapBox struct {
	mu sync.Mutex
	t  *trap
}

func (b *trapBox) arm(t *trap) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.t != nil {
		b.t.Release()
	}
	b.t = t
}

func (b *trapBox) current() *trap {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.t
}

func newRegionProxy(t *testing.T, region, upstream string, box *trapBox) *regionProxy {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &regionProxy{region: region, box: box, rp: httputil.NewSingleHostReverseProxy(u)}
	p.srv = httptest.NewServer(p)
	p.rp.ModifyResponse = p.announceProxy
	return p
}

func (p *regionProxy) URL() string { return p.srv.URL }

// Close releases whatever is held and stops the proxy.
func (p *regionProxy) Close() {
	if t := p.box.current(); t != nil {
		t.Release()
	}
	p.srv.Close()
}

func (p *regionProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := p.box.current()
	switch {
	case t == nil:
	case t.observe(p.region, r):
		select {
		case <-t.release:
		case <-r.Context().Done():
			close(t.abandoned)
			return
		}
		defer close(t.answered)
	case t.changeArrived(r):
		t.Release()
		select {
		case <-t.answered:
		case <-t.abandoned:
		case <-r.Context().Done():
			return
		}
	}
	p.rp.ServeHTTP(w, r)
}

// announceProxy replaces the cluster endpoints of the region's info by the proxy's URL.
func (p *regionProxy) announceProxy(resp *http.Response) error {
	if resp.Request.Method != http.MethodGet || resp.Request.URL.Path != api.PathPrefix+"/info" || resp.StatusCode != http.StatusOK {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	var info api.Info
	if err := json.Unmarshal(body, &info); err == nil {
		info.Endpoints = []string{p.URL()}
		if b, err := json.Marshal(info); err == nil {
			body = b
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	resp.Header.Del("Content-Encoding")
	return nil
}

// pathOf joins segments under the API prefix.
func pathOf(segments ...string) string {
	return api.PathPrefix + "/" + strings.Join(segments, "/")
}
