package rack

import (
	"context"
	"errors"
	"github.com/ironflow/ironflow/internal/testutil"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/dev/temporalserver"
	"github.com/ironflow/ironflow/region/api"
)

// probeResult is what transferProbe saw.
type probeResult struct {
	Before, After rackacts.State
	RefusedType   string
	Moved         rackacts.SwapRegionEndpointsResult
	Exported      rackacts.ExportLeasesResult
}

// transferProbe drives the rack's activities on its own task queue the way transfer-rack
// does: state, a refused move, the move, the lease export, state again.
func transferProbe(ctx workflow.Context, rackUUID, target string) (probeResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           rackacts.TaskQueue(rackUUID),
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var a *rackacts.Activities
	var r probeResult
	if err := workflow.ExecuteActivity(ctx, a.ReportState).Get(ctx, &r.Before); err != nil {
		return r, err
	}
	err := workflow.ExecuteActivity(ctx, a.SwapRegionEndpoints, rackacts.SwapRegionEndpointsInput{URLs: []string{target}, Secret: "nope"}).Get(ctx, nil)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		r.RefusedType = appErr.Type()
	}
	if err := workflow.ExecuteActivity(ctx, a.SwapRegionEndpoints, rackacts.SwapRegionEndpointsInput{URLs: []string{target}, Secret: "region-b"}).Get(ctx, &r.Moved); err != nil {
		return r, err
	}
	if err := workflow.ExecuteActivity(ctx, a.ExportLeases).Get(ctx, &r.Exported); err != nil {
		return r, err
	}
	return r, workflow.ExecuteActivity(ctx, a.ReportState).Get(ctx, &r.After)
}

// TestRackWorkerRunsTheTransferActivities runs the rack with its worker against a Temporal
// dev server and drives its activities from a workflow.
func TestRackWorkerRunsTheTransferActivities(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the Temporal dev server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := temporalserver.Start(ctx, temporalserver.Options{Headless: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()

	src := startRegion(t, pgtest.NewDatabase(t), "region-a")
	dst := startRegion(t, pgtest.NewDatabase(t), "region-b")
	dir := t.TempDir()
	st, err := Register(ctx, RegisterOptions{URLs: []string{src.URL}, Secret: testSecret, Name: "rack-1", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	mac, reserved := network(t, src.admin(), st.Uuid)
	if _, err := dst.admin().Racks().Create(ctx, api.Rack{Uuid: st.Uuid, Name: "rack-1"}); err != nil {
		t.Fatal(err)
	}
	// A transfer copies the network with its UUIDs (ImportRack); the region accepts leases only
	// on subnets of the rack's VLANs, so region-b gets the same subnets.
	copyNetwork(t, src.admin(), dst.admin())

	temporalLog := tlog.NewStructuredLogger(quiet)
	o := rackOptions(t, dir)
	o.Temporal = client.Options{HostPort: srv.Address, Logger: temporalLog}
	o.RegionSecrets = map[string]string{"region-b": testSecret}
	startRack(t, o)
	agent := newRelayAgent(t, o.DHCPRelayListen)
	testutil.Eventually(t, 10*time.Second, "the reserved address over DHCP", func() bool { return agent.dora(t, mac) == reserved })

	tc, err := client.DialContext(ctx, client.Options{HostPort: srv.Address, Logger: temporalLog})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	w := worker.New(tc, "rack-test", worker.Options{})
	w.RegisterWorkflow(transferProbe)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "rack-test"}, transferProbe, st.Uuid, dst.URL)
	if err != nil {
		t.Fatal(err)
	}
	var r probeResult
	if err := run.Get(ctx, &r); err != nil {
		t.Fatal(err)
	}
	if r.Before.Uuid != st.Uuid || r.Before.Region != "region-a" || r.Before.CurrentRegion != src.URL || r.Before.ActiveLeases != 1 || !r.Before.Serving.DHCP {
		t.Errorf("state before the move: %+v", r.Before)
	}
	if r.RefusedType != rackacts.ErrTypeUnknownSecret {
		t.Errorf("move with an unknown secret failed with type %q, want %s", r.RefusedType, rackacts.ErrTypeUnknownSecret)
	}
	if r.Moved.Region != "region-b" || r.Exported.Exported != 1 || r.After.Region != "region-b" || r.After.CurrentRegion != dst.URL {
		t.Errorf("moved %+v, exported %+v, state after %+v", r.Moved, r.Exported, r.After)
	}
	if got := agent.dora(t, mac); got != reserved {
		t.Errorf("after the move the machine got %s, want %s", got, reserved)
	}
}
