package client

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

func TestSecretAndAdhocCallsUseTheContract(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		call     func(c *Client) error
		method   string
		path     string
		wantBody string
		answer   string
	}{
		{"put secret", func(c *Client) error {
			return c.PutSecret(ctx, "u1", api.Secret{Name: "migrate-machine/esxi-ssh-priv-key", Value: "k"})
		}, "PUT", "/api/v1/machines/u1/secrets/migrate-machine%2Fesxi-ssh-priv-key", `{"Name":"migrate-machine/esxi-ssh-priv-key","Value":"k"}`, ``},
		{"get secret", func(c *Client) error { _, err := c.GetSecret(ctx, "Name:birdy", "s"); return err },
			"GET", "/api/v1/machines/Name:birdy/secrets/s", "", `{"Name":"s","Value":"v"}`},
		{"delete secret", func(c *Client) error { return c.DeleteSecret(ctx, "u1", "s") },
			"DELETE", "/api/v1/machines/u1/secrets/s", "", ``},
		{"run adhoc", func(c *Client) error {
			_, err := c.RunAdhoc(ctx, "u1", api.AdhocRequest{Script: "echo hi", TimeoutSeconds: 5})
			return err
		}, "POST", "/api/v1/machines/u1/run", `{"Script":"echo hi","TimeoutSeconds":5}`, `{}`},
		{"task", func(c *Client) error { _, err := c.Tasks().Get(ctx, "hello-world"); return err },
			"GET", "/api/v1/tasks/hello-world", "", `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, rec := newTestClient(t, http.StatusOK, tt.answer)
			if err := tt.call(c); err != nil {
				t.Fatal(err)
			}
			got := rec.only(t)
			if got.method != tt.method || got.path != tt.path || got.body != tt.wantBody || got.auth != "Bearer tok" {
				t.Errorf("request %+v, want %s %s body %q", got, tt.method, tt.path, tt.wantBody)
			}
		})
	}
}

func TestSecretCallsRefuseEmptyNames(t *testing.T) {
	c, rec := newTestClient(t, http.StatusOK, `{}`)
	ctx := context.Background()
	for name, err := range map[string]error{
		"put":    c.PutSecret(ctx, "", api.Secret{Name: "s"}),
		"delete": c.DeleteSecret(ctx, "", "s"),
		"run":    func() error { _, err := c.RunAdhoc(ctx, "", api.AdhocRequest{Script: "true"}); return err }(),
	} {
		if err == nil {
			t.Errorf("%s with an empty machine key succeeded", name)
		}
	}
	if len(rec.requests) != 0 {
		t.Errorf("requests were sent: %+v", rec.requests)
	}
}

func TestGetSecretNotFound(t *testing.T) {
	c, _ := newTestClient(t, http.StatusNotFound, `{"Error":"machine u1 has no secret s","Code":404}`)
	_, err := c.GetSecret(context.Background(), "u1", "s")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("err = %v, want a 404 APIError", err)
	}
}
