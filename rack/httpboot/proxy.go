package httpboot

import (
	"net/http"
	"net/http/httputil"
)

// newProxy forwards the agent and metadata APIs to the region. Failover happens inside
// Region.Do; the client sees 502 only when every region endpoint failed.
func (s *Server) newProxy() http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetXForwarded() // the region identifies machines by their address
		},
		Transport: regionTransport{s.cfg.Region},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.metrics.proxyErrors.Inc()
			s.log.Warn("region proxy failed", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "error", err)
			writeError(w, http.StatusBadGateway, "no region reachable")
		},
	}
}

// regionTransport sends the proxy's outbound requests through the region link.
type regionTransport struct{ region Region }

func (t regionTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.region.Do(req)
}
