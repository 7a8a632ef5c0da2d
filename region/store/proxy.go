package store

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// maxConnectPorts bounds the CONNECT allow-list a region sends its racks.
const maxConnectPorts = 64

// ProxySettings are the region's settings of its racks' HTTP proxy for machines: the
// defaults (api.RackProxy's zero value) until an operator sets them.
func (s *Store) ProxySettings(ctx context.Context) (api.RackProxy, error) {
	return proxySettings(ctx, s.pool)
}

func proxySettings(ctx context.Context, q querier) (api.RackProxy, error) {
	var doc []byte
	err := q.QueryRow(ctx, "SELECT doc FROM proxy_settings").Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.RackProxy{ConnectPorts: []int{}}, nil
	}
	if err != nil {
		return api.RackProxy{}, classify(err)
	}
	var p api.RackProxy
	if err := json.Unmarshal(doc, &p); err != nil {
		return api.RackProxy{}, err
	}
	return p, nil
}

// SetProxySettings replaces the proxy settings; every rack's config changes with them.
func (s *Store) SetProxySettings(ctx context.Context, p api.RackProxy) (api.RackProxy, error) {
	if p.ConnectPorts == nil {
		p.ConnectPorts = []int{}
	}
	if err := validProxySettings(p); err != nil {
		return api.RackProxy{}, err
	}
	doc, err := json.Marshal(p)
	if err != nil {
		return api.RackProxy{}, err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO proxy_settings (doc) VALUES ($1)
		ON CONFLICT (singleton) DO UPDATE SET doc = excluded.doc`, doc)
	return p, classify(err)
}

func validProxySettings(p api.RackProxy) error {
	if err := validProxyParent("proxy", "parent", p.Parent); err != nil {
		return err
	}
	if len(p.ConnectPorts) > maxConnectPorts {
		return invalidf("proxy connect ports: %d, at most %d", len(p.ConnectPorts), maxConnectPorts)
	}
	for i, port := range p.ConnectPorts {
		if port < 1 || port > 65535 {
			return invalidf("proxy connect port %d is not a TCP port", port)
		}
		if slices.Contains(p.ConnectPorts[:i], port) {
			return invalidf("proxy connect port %d listed twice", port)
		}
	}
	if p.CacheBytes < -1 {
		return invalidf("proxy cache bytes %d: 0 for the default, -1 for none, or a size", p.CacheBytes)
	}
	return nil
}

// validProxyParent refuses a parent proxy that is not "" or an http://host:port URL.
func validProxyParent(noun, field, parent string) error {
	if parent == "" {
		return nil
	}
	u, err := url.Parse(parent)
	if err != nil || u.Scheme != "http" || u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return invalidf("%s %s %q is not an http://host:port URL", noun, field, parent)
	}
	return nil
}
