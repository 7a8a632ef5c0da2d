package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/ironflow/ironflow/region/api"
)

// JobLog returns the whole log of the job at key.
func (c *Client) JobLog(ctx context.Context, key string) (string, error) {
	return callKey[string](ctx, c, http.MethodGet, nil, api.KindJobs, key, "log")
}

// AppendJobLog appends text to the log of the job at key.
func (c *Client) AppendJobLog(ctx context.Context, key, text string) error {
	path, err := keyPath(api.KindJobs, key, "log")
	if err != nil {
		return err
	}
	body := rawBody{contentType: "text/plain; charset=utf-8", data: []byte(text)}
	return c.do(ctx, request{method: http.MethodPut, path: path, in: body})
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
	return call[api.Info](ctx, c, request{method: http.MethodGet, path: apiPath("info")})
}

// Health returns nil when the region answers /healthz with a 2xx status.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, request{method: http.MethodGet, path: "/healthz"})
}

// RackSecret returns the secret racks register with (admin only).
func (c *Client) RackSecret(ctx context.Context) (api.RackSecret, error) {
	return call[api.RackSecret](ctx, c, request{method: http.MethodGet, path: apiPath("racks", "secret")})
}

// MachineLogs returns a machine's syslog, oldest first, filtered by Since (RFC 3339) and
// After (a message ID); with "limit" in filters, one page.
func (c *Client) MachineLogs(ctx context.Context, key string, filters url.Values) ([]api.SyslogMessage, error) {
	return list[api.SyslogMessage](ctx, c, apiPath(api.KindMachines, key, "logs"), filters)
}

// Enlist reports a booting machine (region/api/enlist.go) with an operator's, admin's or
// rack's token.
func (c *Client) Enlist(ctx context.Context, e api.Enlistment) (api.EnlistResult, error) {
	return call[api.EnlistResult](ctx, c, request{method: http.MethodPost, path: apiPath("enlist"), in: e})
}
