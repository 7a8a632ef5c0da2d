package server

import (
	"net/http"

	"github.com/ironflow/ironflow/region/api"
)

// resProxy is the region's settings of its racks' HTTP proxy for machines: every token but a
// machine's reads them, operators and admins change them.
const resProxy = "proxy"

// proxyRoutes registers the proxy settings (api.ProxyPath).
func (s *Server) proxyRoutes() {
	s.handle(route{pattern: "GET " + api.ProxyPath, resource: resProxy, h: s.showProxySettings})
	s.handle(route{pattern: "PUT " + api.ProxyPath, resource: resProxy, write: true, h: s.setProxySettings})
}

func (s *Server) showProxySettings(w http.ResponseWriter, r *http.Request, _ *call) error {
	p, err := s.st.ProxySettings(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) setProxySettings(w http.ResponseWriter, r *http.Request, c *call) error {
	var p api.RackProxy
	if err := decodeBody(w, r, &p); err != nil {
		return err
	}
	p, err := s.st.SetProxySettings(r.Context(), p)
	if err != nil {
		return err
	}
	s.log.Info("proxy settings changed", "by", c.by.User, "disabled", p.Disabled, "parent", p.Parent, "connect_ports", p.ConnectPorts, "cache_bytes", p.CacheBytes)
	writeJSON(w, http.StatusOK, p)
	return nil
}
