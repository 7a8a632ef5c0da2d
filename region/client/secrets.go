package client

import (
	"context"
	"net/http"

	"github.com/ironflow/ironflow/region/api"
)

// Machine secrets of region/api/secrets.go: values that must never enter a machine's JSON,
// an export or workflow history (the ESXi path's temporary SSH key).

// PutSecret stores secret under its name on the machine at key, replacing an older value.
func (c *Client) PutSecret(ctx context.Context, key string, secret api.Secret) error {
	path, err := keyPath(api.KindMachines, key, "secrets", secret.Name)
	if err != nil {
		return err
	}
	return c.send(ctx, Request{Method: http.MethodPut, Path: path, Body: secret})
}

// GetSecret returns the secret name of the machine at key; a missing one is an *APIError 404.
func (c *Client) GetSecret(ctx context.Context, key, name string) (api.Secret, error) {
	return callKey[api.Secret](ctx, c, http.MethodGet, nil, api.KindMachines, key, "secrets", name)
}

// DeleteSecret removes the secret name of the machine at key; it succeeds when there is none.
func (c *Client) DeleteSecret(ctx context.Context, key, name string) error {
	path, err := keyPath(api.KindMachines, key, "secrets", name)
	if err != nil {
		return err
	}
	return c.send(ctx, Request{Method: http.MethodDelete, Path: path})
}
