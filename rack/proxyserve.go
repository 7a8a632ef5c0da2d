package rack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ironflow/ironflow/rack/proxy"
	"github.com/ironflow/ironflow/region/api"
)

// proxyCacheDir is the proxy's disk cache under the state dir, unless Options name one.
const proxyCacheDir = "proxy-cache"

// openProxyServer builds the HTTP proxy for machines and its cache, before the region link,
// whose cached config configures it.
func (p *process) openProxyServer() error {
	if len(p.o.ProxyListen) == 0 {
		return nil
	}
	cache, err := proxy.OpenCache(p.o.ProxyCacheDir, api.DefaultProxyCacheBytes)
	if err != nil {
		return err
	}
	settings, _, err := proxySettings(api.RackConfig{})
	if err != nil {
		return err
	}
	own := make([]netip.Addr, 0, len(p.o.ProxyListen)+1)
	for _, addr := range p.o.ProxyListen {
		if ap, err := netip.ParseAddrPort(addr); err == nil {
			own = append(own, ap.Addr())
		}
	}
	if p.o.ServerIP.IsValid() {
		own = append(own, p.o.ServerIP)
	}
	cp := &controlPlane{own: own, endpoints: p.region.endpoints}
	srv, err := proxy.New(proxy.Config{Serves: p.config.Serves, Targets: proxy.Targets{ControlPlane: cp.addrs},
		Cache: cache, Settings: settings, Registry: p.reg, Logger: p.log})
	if err != nil {
		return err
	}
	p.proxy = srv
	p.config.proxy = &proxyService{srv: srv, cache: cache}
	return nil
}

// openProxyListeners binds the proxy's listeners, in the namespace open runs in.
func (p *process) openProxyListeners() error {
	for _, addr := range p.o.ProxyListen {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("proxy listen %s: %w", addr, err)
		}
		p.closers = append(p.closers, func() error {
			if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				return err
			}
			return nil
		})
		p.services = append(p.services, func(ctx context.Context) error { return p.proxy.ServeListener(ctx, ln) })
	}
	return nil
}

// proxyURL is the HTTP proxy for machines reaching the rack at host, "" while the rack
// serves none there (the region disabled it, or no listener has that address).
func (p *process) proxyURL(host string) string {
	if p.proxy == nil || !p.proxy.Enabled() {
		return ""
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return ""
	}
	for _, addr := range p.o.ProxyListen {
		ap, err := netip.ParseAddrPort(addr)
		if err == nil && (ap.Addr() == a || ap.Addr().IsUnspecified()) {
			return "http://" + net.JoinHostPort(host, strconv.Itoa(int(ap.Port())))
		}
	}
	return ""
}

// proxyService is the proxy as the config applier drives it.
type proxyService struct {
	srv   *proxy.Server
	cache *proxy.Cache
}

func (s *proxyService) configure(st proxy.Settings, cacheBytes int64) {
	s.srv.Configure(st)
	s.cache.SetLimit(cacheBytes)
}

// proxySettings are the proxy's settings and cache size of a rack config: the region's, and
// the parents of subnets that name their own.
func proxySettings(rc api.RackConfig) (proxy.Settings, int64, error) {
	cfg := rc.Proxy
	st := proxy.Settings{Enabled: !cfg.Disabled, ConnectPorts: cfg.ConnectPorts}
	if len(st.ConnectPorts) == 0 {
		st.ConnectPorts = []int{443}
	}
	var err error
	if st.Parent, err = parentURL(cfg.Parent); err != nil {
		return proxy.Settings{}, 0, err
	}
	for _, s := range rc.Subnets {
		if s.ProxyParent == "" {
			continue
		}
		p, err := netip.ParsePrefix(s.CIDR)
		if err != nil {
			return proxy.Settings{}, 0, fmt.Errorf("subnet %s: CIDR %q: %w", s.Uuid, s.CIDR, err)
		}
		parent, err := parentURL(s.ProxyParent)
		if err != nil {
			return proxy.Settings{}, 0, fmt.Errorf("subnet %s: %w", s.Uuid, err)
		}
		st.SubnetParents = append(st.SubnetParents, proxy.SubnetParent{Prefix: p, Parent: parent})
	}
	size := cfg.CacheBytes
	switch {
	case size == 0:
		size = api.DefaultProxyCacheBytes
	case size < 0:
		size = 0
	}
	return st, size, nil
}

// parentURL is a parent proxy's URL, nil for "" (direct).
func parentURL(parent string) (*url.URL, error) {
	if parent == "" {
		return nil, nil
	}
	u, err := url.Parse(parent)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("proxy parent %q: want http://host:port", parent)
	}
	return u, nil
}

// controlPlane lists the addresses the proxy never reaches for a client: the rack's own
// (its listeners, its server address, every interface's) and its regions' (resolved from
// their endpoints), recomputed at most every controlPlaneTTL.
type controlPlane struct {
	own       []netip.Addr
	endpoints func() []string

	mu   sync.Mutex
	list []netip.Addr
	at   time.Time
}

const controlPlaneTTL = 10 * time.Second

func (c *controlPlane) addrs() []netip.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) < controlPlaneTTL {
		return c.list
	}
	out := slices.Clone(c.own)
	if ifaddrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ifaddrs {
			if n, ok := a.(*net.IPNet); ok {
				if v, ok := netip.AddrFromSlice(n.IP); ok {
					out = append(out, v.Unmap())
				}
			}
		}
	}
	for _, e := range c.endpoints() {
		out = append(out, endpointAddrs(e)...)
	}
	c.list, c.at = out, time.Now()
	return out
}

// endpointAddrs are the addresses of a region endpoint URL's host.
func endpointAddrs(endpoint string) []netip.Addr {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil {
		return []netip.Addr{a.Unmap()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	addrs, _ := net.DefaultResolver.LookupNetIP(ctx, "ip", u.Hostname())
	return addrs
}
