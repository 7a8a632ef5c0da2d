package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ironflow/ironflow/region/api"
)

// JobLog returns the whole log of the job at key.
func (c *Client) JobLog(ctx context.Context, key string) (string, error) {
	return callAt[string](ctx, c, Request{Method: http.MethodGet, Limit: MaxJobLog}, api.KindJobs, key, "log")
}

// AppendJobLog appends text to the log of the job at key.
func (c *Client) AppendJobLog(ctx context.Context, key, text string) error {
	path, err := keyPath(api.KindJobs, key, "log")
	if err != nil {
		return err
	}
	body := Raw{ContentType: "text/plain; charset=utf-8", Data: []byte(text)}
	return c.send(ctx, Request{Method: http.MethodPut, Path: path, Body: body})
}

// MintToken mints a token for user; the answer is the only time the token is shown.
func (c *Client) MintToken(ctx context.Context, user string, req api.TokenRequest) (api.Token, error) {
	return callKey[api.Token](ctx, c, http.MethodPost, req, api.KindUsers, user, "token")
}

// Events returns the audit log, newest first, filtered by Kind/Key (nil for everything).
func (c *Client) Events(ctx context.Context, filters url.Values) ([]api.Event, error) {
	return list[api.Event](ctx, c, apiPath("events"), filters)
}

// Info describes the region and the endpoints of its cluster (no token needed).
func (c *Client) Info(ctx context.Context) (api.Info, error) {
	return call[api.Info](ctx, c, Request{Method: http.MethodGet, Path: apiPath("info")})
}

// Health returns nil when the region answers /healthz with a 2xx status.
func (c *Client) Health(ctx context.Context) error {
	return c.send(ctx, Request{Method: http.MethodGet, Path: "/healthz"})
}

// RackSecret returns the secret racks register with (admin only).
func (c *Client) RackSecret(ctx context.Context) (api.RackSecret, error) {
	return call[api.RackSecret](ctx, c, Request{Method: http.MethodGet, Path: apiPath("racks", "secret")})
}

// ProxySettings returns the region's settings of its racks' HTTP proxy for machines.
func (c *Client) ProxySettings(ctx context.Context) (api.RackProxy, error) {
	return call[api.RackProxy](ctx, c, Request{Method: http.MethodGet, Path: api.ProxyPath})
}

// SetProxySettings replaces them; every rack applies them with its next config.
func (c *Client) SetProxySettings(ctx context.Context, p api.RackProxy) (api.RackProxy, error) {
	return call[api.RackProxy](ctx, c, Request{Method: http.MethodPut, Path: api.ProxyPath, Body: p})
}

// MachineLogs returns a machine's syslog, oldest first, filtered by Since (RFC 3339) and
// After (a message ID); with "limit" in filters, one page.
func (c *Client) MachineLogs(ctx context.Context, key string, filters url.Values) ([]api.SyslogMessage, error) {
	return list[api.SyslogMessage](ctx, c, apiPath(api.KindMachines, key, "logs"), filters)
}

// RegisterRack registers a rack (region/api/rack.go) with the region's rack secret, or with
// the rack's own token to the region that issued it.
func (c *Client) RegisterRack(ctx context.Context, reg api.RackRegistration) (api.RackRegistered, error) {
	return call[api.RackRegistered](ctx, c, Request{Method: http.MethodPost, Path: apiPath("racks", "register"), Body: reg})
}

// Enlist reports a booting machine (region/api/enlist.go) with an operator's, admin's or
// rack's token.
func (c *Client) Enlist(ctx context.Context, e api.Enlistment) (api.EnlistResult, error) {
	return call[api.EnlistResult](ctx, c, Request{Method: http.MethodPost, Path: apiPath("enlist"), Body: e})
}

// DNSQuery asks the region's DNS over HTTP (api.DNSQueryPath) the packed DNS message query and
// returns the packed answer, of the region's data at serial minSerial or newer.
func (c *Client) DNSQuery(ctx context.Context, query []byte, minSerial uint32) ([]byte, error) {
	a, err := c.Do(ctx, Request{
		Method: http.MethodPost, Path: api.DNSQueryPath, Limit: MaxDNSAnswer,
		Header: http.Header{
			"Accept":            {api.DNSMessageType},
			api.DNSSerialHeader: {strconv.FormatUint(uint64(minSerial), 10)},
		},
		Body: Raw{ContentType: api.DNSMessageType, Data: query},
	})
	return a.Body, err
}

// SessionWhoami returns whom a web UI session acts as, given its cookie (name=value).
func (c *Client) SessionWhoami(ctx context.Context, cookie string) (api.Whoami, error) {
	return call[api.Whoami](ctx, c, Request{Method: http.MethodGet, Path: api.UISessionPath, Header: http.Header{"Cookie": {cookie}}})
}
