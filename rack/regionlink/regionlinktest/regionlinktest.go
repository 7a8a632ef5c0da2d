// Package regionlinktest runs stand-in regions on 127.0.0.1 for rack tests: /healthz that can be
// switched unhealthy, /api/v1/info, a rack config with ETag, and an echo of every other request.
package regionlinktest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// ConfigPath is where a stand-in region serves the rack config.
const ConfigPath = api.PathPrefix + "/racks/test-rack/config"

// Echo is what a stand-in region answers to a request it has no route for.
type Echo struct {
	Region   string `json:"Region"`
	Method   string `json:"Method"`
	Path     string `json:"Path"`
	RawQuery string `json:"RawQuery"`
	Body     string `json:"Body"`
	Header   http.Header
}

// Region is one stand-in region process.
type Region struct {
	Name string
	URL  string

	tb        testing.TB
	addr      string
	unhealthy atomic.Bool
	echoed    atomic.Int64

	mu            sync.Mutex
	srv           *httptest.Server
	endpoints     []string
	config        []byte
	etag          bool
	configSet     chan struct{} // closed by SetConfig, then replaced: wakes long polls
	configFetches int
	notModified   int
}

// Start runs a region named name; it is closed when the test ends.
func Start(tb testing.TB, name string) *Region {
	tb.Helper()
	r := &Region{Name: name, tb: tb, configSet: make(chan struct{})}
	r.srv = httptest.NewServer(r.handler())
	r.URL = r.srv.URL
	r.addr = r.srv.Listener.Addr().String()
	tb.Cleanup(r.Close)
	return r
}

// Close stops the region as if its process died.
func (r *Region) Close() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.CloseClientConnections()
		srv.Close()
	}
}

// Restart brings a closed region back on the same address.
func (r *Region) Restart() {
	r.tb.Helper()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.tb.Fatalf("restart %s: %v", r.Name, err)
	}
	srv := httptest.NewUnstartedServer(r.handler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
}

// SetHealthy makes /healthz answer 200 (true) or 503 (false).
func (r *Region) SetHealthy(ok bool) { r.unhealthy.Store(!ok) }

// SetEndpoints sets the cluster endpoints /api/v1/info reports.
func (r *Region) SetEndpoints(urls ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endpoints = urls
}

// SetConfig sets the rack config; with etag the region sends an ETag and honours If-None-Match
// and the wait parameter (a long poll, as the region does).
func (r *Region) SetConfig(body string, etag bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.config, r.etag = []byte(body), etag
	close(r.configSet)
	r.configSet = make(chan struct{})
}

// ConfigFetches counts config requests and how many were answered 304.
func (r *Region) ConfigFetches() (total, notModified int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.configFetches, r.notModified
}

// Echoed counts the requests answered by the echo handler.
func (r *Region) Echoed() int64 { return r.echoed.Load() }

func (r *Region) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if r.unhealthy.Load() {
			http.Error(w, "unhealthy", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("GET "+api.PathPrefix+"/info", func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		info := api.Info{Name: r.Name, Uuid: r.Name + "-uuid", URL: r.URL, Endpoints: r.endpoints, Version: "test"}
		r.mu.Unlock()
		writeJSON(w, http.StatusOK, info)
	})
	mux.HandleFunc("GET "+ConfigPath, r.serveConfig)
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		r.echoed.Add(1)
		body, _ := io.ReadAll(req.Body)
		w.Header().Set("X-Region", r.Name)
		if req.URL.Query().Get("redirect") != "" {
			w.Header().Set("Location", req.URL.Query().Get("redirect"))
			writeJSON(w, http.StatusTemporaryRedirect, api.Redirect{Endpoint: req.URL.Query().Get("redirect")})
			return
		}
		writeJSON(w, http.StatusOK, Echo{Region: r.Name, Method: req.Method, Path: req.URL.Path,
			RawQuery: req.URL.RawQuery, Body: string(body), Header: req.Header})
	})
	return mux
}

func (r *Region) serveConfig(w http.ResponseWriter, req *http.Request) {
	wait, _ := time.ParseDuration(req.URL.Query().Get("wait"))
	deadline := time.Now().Add(wait)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.configFetches++
	for {
		if r.config == nil {
			writeJSON(w, http.StatusNotFound, api.Error{Error: "no config", Code: http.StatusNotFound})
			return
		}
		if !r.etag {
			break
		}
		sum := sha256.Sum256(r.config)
		tag := `"` + hex.EncodeToString(sum[:8]) + `"`
		w.Header().Set("ETag", tag)
		if req.Header.Get("If-None-Match") != tag {
			break
		}
		if !time.Now().Before(deadline) || req.Context().Err() != nil {
			r.notModified++
			w.WriteHeader(http.StatusNotModified)
			return
		}
		set := r.configSet
		r.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-set:
		case <-t.C:
		case <-req.Context().Done():
		}
		t.Stop()
		r.mu.Lock()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(r.config)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
