package client

import (
	"context"
	"net/http"

	"github.com/ironflow/ironflow/region/api"
)

// Tasks are the named scripts jobs run (region/api/agent.go).
func (c *Client) Tasks() Resource[api.Task] { return For[api.Task](c, api.KindTasks) }

// RunAdhoc asks the agent of the machine at key to run a script once; the answer is the
// "created" job, whose State, ExitState and log tell how it went.
func (c *Client) RunAdhoc(ctx context.Context, key string, req api.AdhocRequest) (api.Job, error) {
	return callKey[api.Job](ctx, c, http.MethodPost, req, api.KindMachines, key, "run")
}
