package temporalserver

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

func TestTemporalDevServerHasSearchAttributes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the Temporal dev server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := Start(ctx, Options{Headless: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, err := client.Dial(client.Options{HostPort: srv.Address})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := workers.RegisterSearchAttributes(ctx, c, "default"); err != nil {
		t.Fatal(err)
	}
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range workflows.SearchAttributes() {
		if _, ok := resp.GetCustomAttributes()[key.GetName()]; !ok {
			t.Errorf("search attribute %s not registered; have %v", key.GetName(), resp.GetCustomAttributes())
		}
	}
}
