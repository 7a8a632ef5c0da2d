package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/heartbeat"
	"github.com/ironflow/ironflow/dev/temporalserver"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/tickets"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

// The migration tests share one Temporal dev server and one worker running the real
// MigrateMachine workflow with fakeActivities. Each test migrates its own machine UUID, so
// each has its own workflow ID.

func TestMain(m *testing.M) {
	code := m.Run()
	shared.stop()
	os.Exit(code)
}

// temporalHarness is the shared dev server, a client of it and the worker.
type temporalHarness struct {
	once   sync.Once
	err    error
	server *temporalserver.Server
	client client.Client
	worker worker.Worker
	fake   *fakeActivities
}

var shared temporalHarness

// temporalEnv starts the shared server and worker on first use and points the CLI's
// Temporal flags at it through the environment.
func temporalEnv(t *testing.T) (client.Client, *fakeActivities) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the Temporal dev server")
	}
	shared.once.Do(func() { shared.err = shared.start() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	t.Setenv("IRONFLOW_TEMPORAL_ADDRESS", shared.server.Address)
	return shared.client, shared.fake
}

func (h *temporalHarness) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := temporalserver.Start(ctx, temporalserver.Options{Headless: true})
	if err != nil {
		return err
	}
	h.server = srv
	if h.client, err = client.DialContext(ctx, client.Options{HostPort: srv.Address, Logger: quietLogger()}); err != nil {
		return err
	}
	if err := workers.RegisterSearchAttributes(ctx, h.client, defaultNamespace); err != nil {
		return err
	}
	h.fake = newFakeActivities()
	h.worker = worker.New(h.client, workflows.TaskQueue, worker.Options{})
	h.worker.RegisterWorkflow(workflows.MigrateMachine)
	h.worker.RegisterWorkflow(workflows.ListRegions)
	h.worker.RegisterActivity(h.fake)
	return h.worker.Start()
}

func (h *temporalHarness) stop() {
	if h.worker != nil {
		h.fake.releaseAll()
		h.worker.Stop()
	}
	if h.client != nil {
		h.client.Close()
	}
	if h.server != nil {
		h.server.Stop()
	}
}

func quietLogger() temporallog.Logger {
	return temporallog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// regionURLs are the regions the fake worker knows, with their public URLs.
var regionURLs = map[string]string{
	"region-a": "https://region-a.example:5240",
	"region-b": "https://region-b.example:5240",
}

// signers sign the tickets of the test regions; the test regions and the fake activities
// share them, as a real region and its imports do.
var signers = func() map[string]*tickets.Signer {
	out := map[string]*tickets.Signer{}
	for name, url := range regionURLs {
		key := sha256.Sum256([]byte("ticket key of " + name))
		s, err := tickets.NewSigner(key[:], name, url)
		if err != nil {
			panic(err)
		}
		out[name] = s
	}
	return out
}()

// fakeActivities stand in for activities.Activities under the same activity names: they
// record what the workflow asked for, check tickets, and hold ExportImport while a test
// keeps a migration running.
type fakeActivities struct {
	mu       sync.Mutex
	machines map[string]string        // machine UUID -> name, the machines on region-a
	calls    map[string][]string      // workflow ID -> activity names in the order they ran
	tickets  map[string]string        // workflow ID -> ID of the ticket its import used
	gates    map[string]chan struct{} // workflow ID -> ExportImport waits until closed
	controls []string                 // the operator controls audited, as "action [window] by user"
}

func newFakeActivities() *fakeActivities {
	return &fakeActivities{
		machines: map[string]string{},
		calls:    map[string][]string{},
		tickets:  map[string]string{},
		gates:    map[string]chan struct{}{},
	}
}

// addMachine puts a machine on region-a.
func (f *fakeActivities) addMachine(uuid, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.machines[uuid] = name
}

// hold makes the migration's ExportImport wait until the returned release is called (also
// called at the end of the test).
func (f *fakeActivities) hold(t *testing.T, workflowID string) (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	gate := make(chan struct{})
	f.gates[workflowID] = gate
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return release
}

func (f *fakeActivities) releaseAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, gate := range f.gates {
		select {
		case <-gate:
		default:
			close(gate)
		}
		delete(f.gates, id)
	}
}

func (f *fakeActivities) called(workflowID string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls[workflowID])
}

func (f *fakeActivities) ticketUsed(workflowID string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tickets[workflowID]
}

func (f *fakeActivities) record(ctx context.Context, name string) string {
	id := activity.GetInfo(ctx).WorkflowExecution.ID
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[id] = append(f.calls[id], name)
	return id
}

func (f *fakeActivities) ValidateMigration(ctx context.Context, in activities.ValidateInput) (activities.ValidateResult, error) {
	f.record(ctx, "ValidateMigration")
	for _, region := range []string{in.SourceRegion, in.TargetRegion} {
		if _, ok := regionURLs[region]; !ok {
			return activities.ValidateResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("region %q is not in this worker's regions file", region), activities.ErrTypeUnknownRegion, nil)
		}
	}
	if err := checkGrant(in); err != nil {
		return activities.ValidateResult{}, err
	}
	f.mu.Lock()
	name, ok := f.machines[in.Machine]
	f.mu.Unlock()
	if !ok || in.SourceRegion != "region-a" {
		return activities.ValidateResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("machine %s not found on region %s", in.Machine, in.SourceRegion), activities.ErrTypeMachineNotFound, nil)
	}
	return activities.ValidateResult{
		MachineUuid:    in.Machine,
		MachineName:    name,
		TargetEndpoint: regionURLs[in.TargetRegion],
		Repoint:        activities.RepointNone,
	}, nil
}

// RegionNames answers ListRegions as a worker with region-a and region-b in its regions file.
func (f *fakeActivities) RegionNames(context.Context) ([]string, error) {
	return slices.Sorted(maps.Keys(regionURLs)), nil
}

func (f *fakeActivities) MintTicket(ctx context.Context, targetRegion string) (string, error) {
	f.record(ctx, "MintTicket")
	t, err := signers[targetRegion].Mint(time.Now(), 0)
	return t.Token, err
}

func (f *fakeActivities) ExportImport(ctx context.Context, in activities.CopyInput) (activities.CopyResult, error) {
	id := f.record(ctx, "ExportImport")
	if in.Ticket == "" { // as the real activity: mint one on the target
		t, err := signers[in.TargetRegion].Mint(time.Now(), 0)
		if err != nil {
			return activities.CopyResult{}, err
		}
		in.Ticket = t.Token
	}
	claims, err := signers[in.TargetRegion].Verify(in.Ticket, time.Now(), tickets.ScopeImport)
	if err != nil {
		return activities.CopyResult{}, temporal.NewNonRetryableApplicationError("import refused: "+err.Error(), activities.ErrTypeRegionRefused, err)
	}
	f.mu.Lock()
	f.tickets[id] = claims.ID
	gate := f.gates[id]
	f.mu.Unlock()
	if gate != nil {
		err := heartbeat.While(ctx, func(ctx context.Context) error { // as the real activity
			select {
			case <-gate:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err != nil {
			return activities.CopyResult{}, err
		}
	}
	return activities.CopyResult{Jobs: 2, Profiles: 2}, nil
}

// AuditMoveControl records the audit of an operator's control of a move.
func (f *fakeActivities) AuditMoveControl(_ context.Context, in activities.MoveControlAuditInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	action := in.Control.Action
	if in.Control.Window > 0 {
		action += fmt.Sprint(" ", in.Control.Window)
	}
	f.controls = append(f.controls, action+" by "+in.Control.By+" on "+in.Region)
	return nil
}

func (f *fakeActivities) audited() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.controls)
}

// MigrateBatch leaves every machine to the per-machine path, whose activities the fake
// records.
func (f *fakeActivities) MigrateBatch(_ context.Context, in activities.BatchInput) (activities.BatchResult, error) {
	return activities.BatchResult{PerMachine: in.Machines}, nil
}

func (f *fakeActivities) Quiesce(ctx context.Context, _ activities.MachineRef) error {
	f.record(ctx, "Quiesce")
	return nil
}

func (f *fakeActivities) Unquiesce(ctx context.Context, _ activities.MachineRef) error {
	f.record(ctx, "Unquiesce")
	return nil
}

func (f *fakeActivities) DeleteImportedCopy(ctx context.Context, _ activities.MachineRef) error {
	f.record(ctx, "DeleteImportedCopy")
	return nil
}

func (f *fakeActivities) UndoCopy(ctx context.Context, _ activities.UndoCopyInput) error {
	f.record(ctx, "UndoCopy")
	return nil
}

func (f *fakeActivities) FinalizeMigration(ctx context.Context, _ activities.FinalizeInput) error {
	f.record(ctx, "FinalizeMigration")
	return nil
}

func (f *fakeActivities) RestoreMigration(ctx context.Context, _ activities.MachineRef) error {
	f.record(ctx, "RestoreMigration")
	return nil
}

func (f *fakeActivities) Activate(ctx context.Context, _ activities.MachineRef) error {
	f.record(ctx, "Activate")
	return nil
}

func (f *fakeActivities) DeleteStub(ctx context.Context, _ activities.MachineRef) error {
	f.record(ctx, "DeleteStub")
	return nil
}

// testRegion is a region API over HTTP with what the migrate commands read: its info, its
// machines, and migrate tickets signed like the fake worker expects.
type testRegion struct {
	name     string
	url      string
	mu       sync.Mutex
	machines map[string]api.Machine // by UUID
	requests []string
}

func newTestRegion(t *testing.T, name string, machines ...api.Machine) *testRegion {
	r := &testRegion{name: name, machines: map[string]api.Machine{}}
	for _, m := range machines {
		r.machines[m.Uuid] = m
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/info", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, http.StatusOK, api.Info{Name: name, Uuid: "uuid-" + name, URL: regionURLs[name], Version: "test"})
	})
	mux.HandleFunc("GET /api/v1/machines/{key}", func(w http.ResponseWriter, req *http.Request) {
		if m, ok := r.lookup(req.PathValue("key")); ok {
			answer(w, http.StatusOK, m)
			return
		}
		answer(w, http.StatusNotFound, api.Error{Error: "machines " + req.PathValue("key") + " not found", Code: http.StatusNotFound})
	})
	mux.HandleFunc("POST /api/v1/migrate-tickets", func(w http.ResponseWriter, req *http.Request) {
		var tr api.TicketRequest
		if err := json.NewDecoder(req.Body).Decode(&tr); err != nil {
			answer(w, http.StatusBadRequest, api.Error{Error: err.Error(), Code: http.StatusBadRequest})
			return
		}
		ticket, err := signers[name].Mint(time.Now(), tr.TTL)
		if err != nil {
			answer(w, http.StatusBadRequest, api.Error{Error: err.Error(), Code: http.StatusBadRequest})
			return
		}
		answer(w, http.StatusOK, ticket)
	})
	grantRoutes(mux, name)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests = append(r.requests, req.Method+" "+req.URL.EscapedPath())
		r.mu.Unlock()
		mux.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *testRegion) lookup(key string) (api.Machine, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.machines[key]; ok {
		return m, true
	}
	for _, m := range r.machines {
		if "Name:"+m.Name == key {
			return m, true
		}
	}
	return api.Machine{}, false
}

func (r *testRegion) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests)
}

// migrationSetup is region-a holding a fresh birdy known to the fake worker, and region-b.
type migrationSetup struct {
	tc         client.Client
	fake       *fakeActivities
	source     *testRegion
	target     *testRegion
	machine    string // birdy's UUID
	workflowID string
}

func newMigrationSetup(t *testing.T) *migrationSetup {
	tc, fake := temporalEnv(t)
	id := uuid.NewString()
	fake.addMachine(id, "birdy")
	s := &migrationSetup{
		tc:         tc,
		fake:       fake,
		source:     newTestRegion(t, "region-a", api.Machine{Uuid: id, Name: "birdy", Runnable: true}),
		target:     newTestRegion(t, "region-b"),
		machine:    id,
		workflowID: workflows.MigrateMachineID(id),
	}
	// Without -E the commands ask the source: list, show and cancel check the caller there.
	t.Setenv(envEndpoint, s.source.url)
	return s
}

// ironflow runs one command line; endpoint is the -E region ("" leaves the default).
func ironflow(t *testing.T, endpoint string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut syncBuffer
	code = ironflowTo(context.Background(), &out, &errOut, endpoint, args...)
	return code, out.String(), errOut.String()
}

func ironflowTo(ctx context.Context, stdout, stderr *syncBuffer, endpoint string, args ...string) int {
	if endpoint != "" {
		args = append([]string{"-E", endpoint}, args...)
	}
	return run(ctx, args, strings.NewReader(""), stdout, stderr)
}

// syncBuffer is safe to read while a command writes to it.
type syncBuffer = testutil.SafeBuffer

// eventually retries check until it returns "" or 20 s have passed, then fails with its
// last complaint.
func eventually(t *testing.T, check func() string) {
	t.Helper()
	testutil.EventuallyOK(t, 20*time.Second, check)
}

// decode parses the JSON a command printed.
func decode[T any](t *testing.T, stdout string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("output is not JSON of %T: %v\n%s", v, err, stdout)
	}
	return v
}
