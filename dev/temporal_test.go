package dev

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
)

func TestTemporalDevServerHasSearchAttributes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the Temporal dev server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := StartTemporal(ctx, TemporalOptions{Headless: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, err := client.Dial(client.Options{HostPort: srv.Address})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	for name := range SearchAttributes {
		if _, ok := resp.GetCustomAttributes()[name]; !ok {
			t.Errorf("search attribute %s not registered; have %v", name, resp.GetCustomAttributes())
		}
	}
}
