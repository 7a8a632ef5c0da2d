package proxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// hopHeaders are a connection's own headers, which a proxy never forwards (RFC 9110 7.6.1).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "TE", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for name := range strings.SplitSeq(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// via names the rack's proxy in the Via header of what it forwards.
const via = "1.1 ironflow-rack"

// roundTrip sends the client's request upstream with extra headers (a revalidation's
// conditions) set; an extra header without values is removed.
func (s *Server) roundTrip(r *http.Request, up *upstream, extra http.Header) (*http.Response, error) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	removeHopHeaders(out.Header)
	out.Header.Add("Via", via)
	for k, v := range extra {
		if len(v) == 0 {
			out.Header.Del(k)
		} else {
			out.Header[k] = v
		}
	}
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header.Set("User-Agent", "") // net/http adds its own otherwise
	}
	return up.transport.RoundTrip(out)
}

// forward relays r to the upstream and its answer back, storing it under storeURL when
// that is not "" and the answer is storable.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, up *upstream, extra http.Header, storeURL string) {
	resp, err := s.roundTrip(r, up, extra)
	if err != nil {
		s.targetFailed(w, r, err)
		return
	}
	s.relay(w, r, resp, storeURL)
}

// serveCached serves r from the cache, revalidating or fetching it as its policy says. One
// client fetches an object missing from the cache; the others asking for it meanwhile wait
// and are served the stored copy (or fetch it themselves when it could not be stored).
func (s *Server) serveCached(w http.ResponseWriter, r *http.Request, up *upstream) {
	key := cacheURL(r)
	for waited := false; ; waited = true {
		if obj, ok := s.cfg.Cache.open(key); ok {
			s.serveOrRevalidate(w, r, up, obj)
			return
		}
		if r.Method == http.MethodHead || waited {
			s.forward(w, r, up, nil, "")
			return
		}
		leader, wait, done := s.cfg.Cache.fetch(key)
		if leader {
			defer done()
			s.forward(w, r, up, nil, key)
			return
		}
		select {
		case <-wait:
		case <-r.Context().Done():
			return
		}
	}
}

// cacheURL is the key of what r asks for.
func cacheURL(r *http.Request) string {
	u := *r.URL
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// serveOrRevalidate serves a cached object when its policy lets it, else asks the upstream
// whether it changed: 304 serves it, anything else replaces it.
func (s *Server) serveOrRevalidate(w http.ResponseWriter, r *http.Request, up *upstream, obj *object) {
	now := time.Now()
	fresh := obj.Policy == immutable || (obj.Policy == untilExpiry && now.Before(obj.expires))
	if fresh && !wantsRevalidation(r.Header) {
		s.serveObject(w, r, obj, resultHit)
		return
	}
	// The client's own conditions are about its copy, not the cache's: the upstream gets the
	// cache's, and the client's are answered from the copy (serveObject).
	cond := http.Header{"If-None-Match": nil, "If-Modified-Since": nil, "If-Match": nil, "If-Unmodified-Since": nil}
	etag, lm := obj.Header.Get("ETag"), obj.Header.Get("Last-Modified")
	if etag != "" {
		cond.Set("If-None-Match", etag)
	}
	if lm != "" {
		cond.Set("If-Modified-Since", lm)
	}
	resp, err := s.roundTrip(r, up, cond)
	if err != nil {
		obj.Close()
		s.targetFailed(w, r, err)
		return
	}
	if resp.StatusCode == http.StatusNotModified && (etag != "" || lm != "") {
		resp.Body.Close()
		if until, ok := expiry(resp.Header, now); ok && obj.Policy == untilExpiry {
			s.cfg.Cache.revalidated(obj.URL, until)
		}
		s.serveObject(w, r, obj, resultRevalidated)
		return
	}
	obj.Close()
	s.relay(w, r, resp, obj.URL)
}

// serveObject answers from a cached object; http.ServeContent handles the client's Range
// and conditions.
func (s *Server) serveObject(w http.ResponseWriter, r *http.Request, obj *object, result string) {
	defer obj.Close()
	h := w.Header()
	for k, v := range obj.Header {
		h[k] = v
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/octet-stream")
	}
	h.Set("Via", via)
	h.Set("X-Cache", "HIT")
	modtime, _ := http.ParseTime(obj.Header.Get("Last-Modified"))
	s.m.requests.WithLabelValues(result).Inc()
	cw := &countingWriter{ResponseWriter: s.stalling(w)}
	http.ServeContent(cw, r, "", modtime, obj.body)
	s.m.bytes.WithLabelValues("cache").Add(float64(cw.n))
}

// relay answers with the upstream's response, storing the body under storeURL when that is
// not "" and it may be stored. A body the upstream cuts short aborts the client's
// connection, so the client sees an error rather than a short object, and nothing is stored.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, resp *http.Response, storeURL string) {
	defer resp.Body.Close()
	var store *writer
	if storeURL != "" && r.Method == http.MethodGet && storable(r, resp) {
		p, until := objectPolicy(r.URL.Path, resp.Header, time.Now())
		var err error
		if store, err = s.cfg.Cache.create(storeURL, resp.Header, p, until); err != nil {
			s.cacheFailed(storeURL, err)
			store = nil
		}
	}
	if store != nil {
		defer store.abort() // after a commit, nothing is left to remove
	}
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	removeHopHeaders(h)
	h.Add("Via", via)
	h.Set("X-Cache", "MISS")
	w.WriteHeader(resp.StatusCode)
	result := resultUncached
	if store != nil {
		result = resultMiss
	}
	s.m.requests.WithLabelValues(result).Inc()
	if r.Method == http.MethodHead {
		return
	}
	n, upErr, clientErr := copyBody(s.stalling(w), resp.Body, store)
	s.m.bytes.WithLabelValues("upstream").Add(float64(n))
	switch {
	case upErr != nil:
		s.m.upstreamErr.Inc()
		s.log.Warn("proxy upstream body failed: client connection aborted, nothing stored", "url", r.URL.String(), "remote", r.RemoteAddr, "bytes", n, "error", upErr)
		panic(http.ErrAbortHandler)
	case clientErr != nil:
		s.log.Info("proxy client went away", "url", r.URL.String(), "remote", r.RemoteAddr, "bytes", n, "error", clientErr)
	case store != nil:
		if err := store.commit(resp.ContentLength); err != nil && !errors.Is(err, errTooBig) {
			s.cacheFailed(storeURL, err)
		}
	}
}

func (s *Server) cacheFailed(url string, err error) {
	s.m.cacheErr.Inc()
	s.log.Warn("proxy cache cannot store an object; serving it uncached", "url", url, "error", err)
}

// copyBody copies an upstream body to the client and the cache, telling the upstream's
// errors from the client's.
func copyBody(dst io.Writer, src io.Reader, store *writer) (n int64, upErr, clientErr error) {
	buf := make([]byte, 64<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			if store != nil {
				store.Write(buf[:k])
			}
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return n, nil, werr
			}
			n += int64(k)
		}
		if err == io.EOF {
			return n, nil, nil
		}
		if err != nil {
			return n, err, nil
		}
	}
}

// stalling wraps w so each write must go out within the stall timeout: a client that stops
// reading loses its connection instead of holding an upstream and a cache write.
func (s *Server) stalling(w http.ResponseWriter) http.ResponseWriter {
	return stallWriter{w, http.NewResponseController(w), s.cfg.Limits.StallTimeout}
}

type stallWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
}

func (w stallWriter) Write(p []byte) (int, error) {
	if err := w.rc.SetWriteDeadline(time.Now().Add(w.stall)); err != nil {
		return 0, err
	}
	return w.ResponseWriter.Write(p)
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

// stallConn is an upstream connection whose every read and write must move within stall.
type stallConn struct {
	net.Conn
	stall time.Duration
}

func (c stallConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.stall)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c stallConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.stall)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
