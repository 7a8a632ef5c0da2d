package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	regionclient "github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/workflows"
)

// fault is what the harness does to a move held at a kill point.
type fault string

const (
	faultKillWorker fault = "kill-worker" // SIGKILL the worker process, start another
	faultCancel     fault = "cancel"      // cancel the workflow
	// cancel-in-undo cancels the workflow and lets the held request land just before the
	// move's next change reaches a region (an undo's, unless the move waits for the step).
	faultCancelInUndo    fault = "cancel-in-undo"
	faultTerminateParent fault = "terminate-parent" // terminate the bulk run the move is part of (at a rack point: the transfer)
	// terminate the rack transfer whose child migration is at the point
	faultTerminateTransfer fault = "terminate-transfer"
	faultDeleteSource      fault = "delete-on-source" // an operator deletes the machine on the source
	faultDeleteTarget      fault = "delete-on-target" // ... or its copy on the target
	faultStopSource        fault = "stop-source"      // the source region's API goes away for the outage
	faultStopTarget        fault = "stop-target"      // ... or the destination's
)

var allFaults = []fault{faultKillWorker, faultCancel, faultCancelInUndo, faultTerminateParent, faultTerminateTransfer, faultDeleteSource, faultDeleteTarget, faultStopSource, faultStopTarget}

// moveIDs name the regions and objects of one run.
type moveIDs struct {
	src, dst string
	machine  string // UUID; for a rack run, the machine a delete fault deletes
	rack     string // UUID, rack runs only
}

// record is what a region holds of the machine when a move reaches a point, which decides
// what an operator's delete there may do.
type record int

const (
	recordNone  record = iota // nothing: a delete finds nothing
	recordLive                // the machine, not held: a delete is the operator's to make
	recordHeld                // held by the move (quiesced source, the stub a rollback restores, the copy): a delete must be refused
	recordStub                // the stub the move is about to delete: a delete changes nothing that matters
	recordMoved               // the machine, active on the target after the commit point: a delete is the operator's, and the move still completes
)

// killPoint is a step boundary: the requests up to the held one, which is the first call of
// the step, and what each region holds of the machine there. A machine point inTransfer is
// also a step of the child migrations of a rack transfer (whose machines have no agent and
// keep their stubs), where terminate-transfer applies.
type killPoint struct {
	name       string
	rack       bool
	inTransfer bool
	calls      func(moveIDs) []call
	src, dst   record
}

// applies says whether fault f makes sense at point p: terminate-transfer needs a child of a
// transfer at the point.
func (p killPoint) applies(f fault) bool {
	return f != faultTerminateTransfer || p.inTransfer
}

func at(region, method string, path ...string) call {
	return call{region: region, method: method, path: pathOf(path...)}
}

// machinePoints are the step boundaries of MigrateMachine for a machine with an agent and
// SkipMachineDestroy false (so every step runs).
var machinePoints = []killPoint{
	{name: "validate", inTransfer: true, src: recordLive, calls: func(r moveIDs) []call { return []call{at(r.src, http.MethodGet, "machines", r.machine)} }},
	{name: "quiesce", inTransfer: true, src: recordLive, calls: func(r moveIDs) []call { return []call{at(r.src, http.MethodPost, "machines", r.machine, "quiesce")} }},
	{name: "copy-export", inTransfer: true, src: recordHeld, calls: func(r moveIDs) []call { return []call{at(r.src, http.MethodGet, "machines", r.machine, "export")} }},
	// The copy step mints its import ticket itself, after the export, so the ticket never
	// enters history: the mint is a point inside the step.
	{name: "copy-mint", inTransfer: true, src: recordHeld, calls: func(r moveIDs) []call {
		return []call{at(r.src, http.MethodGet, "machines", r.machine, "export"), at(r.dst, http.MethodPost, "migrate-tickets")}
	}},
	{name: "copy-import", inTransfer: true, src: recordHeld, calls: func(r moveIDs) []call {
		c := at(r.dst, http.MethodPost, "machines", "import")
		c.bodyHas = r.machine
		return []call{c}
	}},
	{name: "finalize", inTransfer: true, src: recordHeld, dst: recordHeld, calls: func(r moveIDs) []call {
		return []call{at(r.src, http.MethodPost, "machines", r.machine, "finalize-migration")}
	}},
	{name: "repoint-agent", src: recordHeld, dst: recordHeld, calls: func(r moveIDs) []call {
		return []call{at(r.src, http.MethodPost, "machines", r.machine, "finalize-migration"), at(r.dst, http.MethodGet, "machines", r.machine)}
	}},
	{name: "activate", inTransfer: true, src: recordHeld, dst: recordHeld, calls: func(r moveIDs) []call { return []call{at(r.dst, http.MethodPost, "machines", r.machine, "activate")} }},
	{name: "delete-stub", src: recordStub, dst: recordMoved, calls: func(r moveIDs) []call { return []call{at(r.src, http.MethodDelete, "machines", r.machine)} }},
}

// rackPoints are TransferRack's copy, repoint and hand-over boundaries. The repoint is the
// rack controller registering with the target (through the target's proxy, which the rack
// learnt from the target's info). No machine migration runs there: a machine deleted then is
// the operator's delete.
var rackPoints = []killPoint{
	{name: "rack-copy", rack: true, src: recordLive, calls: func(r moveIDs) []call { return []call{at(r.dst, http.MethodPost, "racks", "import")} }},
	{name: "rack-repoint", rack: true, src: recordStub, dst: recordLive, calls: func(r moveIDs) []call { return []call{at(r.dst, http.MethodPost, "racks", "register")} }},
	{name: "rack-hand-over", rack: true, src: recordStub, dst: recordLive, calls: func(r moveIDs) []call {
		return []call{at(r.src, http.MethodPost, "racks", r.rack, "hand-over")}
	}},
}

// killRun is one (point, fault) pair.
type killRun struct {
	point killPoint
	fault fault
}

func (r killRun) String() string { return r.point.name + "/" + string(r.fault) }

// runReport is what one run found.
type runReport struct {
	run        killRun
	reached    bool
	faultNote  string // what the fault did, e.g. the answer to a delete
	outcome    string
	violations []string
}

func (r *runReport) violate(format string, args ...any) {
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// killConfig are the harness's knobs.
type killConfig struct {
	outage  time.Duration // how long a stopped region stays down
	finish  time.Duration // how long a move may take to end after the fault
	release time.Duration // after a cancel or terminate, how long the held request waits for the undo
}

// killEnv is a dev stack with proxies in front of its regions, an `ironflow worker` process
// reaching the regions through them, and where the rack lives now.
type killEnv struct {
	t           *testing.T
	cfg         killConfig
	s           *dev.Stack
	bin         string
	box         *trapBox
	proxies     map[string]*regionProxy
	regionsFile string
	logDir      string
	worker      *exec.Cmd
	workerLogs  []string
	rackHome    string
	gone        map[string]bool // machines of the rack an operator deleted in an earlier run
	closeOnce   sync.Once
}

func newKillEnv(t *testing.T, cfg killConfig) *killEnv {
	t.Helper()
	e := &killEnv{t: t, cfg: cfg, bin: buildIronflow(t), box: &trapBox{}, logDir: t.TempDir()}
	t.Cleanup(e.close)
	e.start(t)
	return e
}

// start starts a fresh stack (the rack on region-a), the proxies and a worker.
func (e *killEnv) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := dev.StartStack(ctx, dev.StackOptions{Seed: true, TemporalUIPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	e.s, e.proxies, e.rackHome, e.gone = s, map[string]*regionProxy{}, "region-a", map[string]bool{}
	var b strings.Builder
	b.WriteString("regions:\n")
	for _, name := range dev.RegionNames {
		p := newRegionProxy(t, name, s.Regions[name].URL, e.box)
		e.proxies[name] = p
		fmt.Fprintf(&b, "  %s:\n    url: %q\n    token: %q\n", name, p.URL(), s.AdminToken)
		putTasks(t, regionClient(s, name), helloTask)
	}
	e.regionsFile = filepath.Join(e.logDir, fmt.Sprintf("regions-%d.yaml", len(e.workerLogs)))
	if err := os.WriteFile(e.regionsFile, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	e.startWorker()
}

// stop stops the worker, the proxies and the stack.
func (e *killEnv) stop() {
	e.stopWorker(syscall.SIGTERM)
	for _, p := range e.proxies {
		p.Close()
	}
	e.proxies = nil
	if e.s != nil {
		e.s.Stop()
		e.s = nil
	}
}

// restart replaces the stack by a fresh one, for a run after one that left the rack where
// no transfer can start.
func (e *killEnv) restart(t *testing.T) {
	t.Helper()
	t.Log("the rack is online on no region: starting a fresh stack")
	e.stop()
	e.start(t)
}

// close stops everything; the worker logs are shown when the test failed.
func (e *killEnv) close() {
	e.closeOnce.Do(func() {
		e.stop()
		if e.t.Failed() {
			for _, path := range e.workerLogs {
				if b, err := os.ReadFile(path); err == nil {
					e.t.Logf("%s:\n%s", filepath.Base(path), b)
				}
			}
		}
	})
}

func (e *killEnv) startWorker() {
	e.t.Helper()
	cmd := exec.Command(e.bin, "worker", "--temporal-address", e.s.Temporal.Address, "--regions-file", e.regionsFile, "--payload-keys", e.s.PayloadKeys, "--make-current")
	path := filepath.Join(e.logDir, fmt.Sprintf("worker-%d.log", len(e.workerLogs)+1))
	logFile, err := os.Create(path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.worker = cmd
	e.workerLogs = append(e.workerLogs, path)
}

func (e *killEnv) stopWorker(sig syscall.Signal) {
	if e.worker == nil {
		return
	}
	_ = e.worker.Process.Signal(sig)
	_ = e.worker.Wait()
	e.worker = nil
}

func (e *killEnv) region(name string) *regionclient.Client { return regionClient(e.s, name) }

func otherRegion(name string) string {
	if name == "region-a" {
		return "region-b"
	}
	return "region-a"
}

// moveInput is the input of every MigrateMachine the harness starts: SkipMachineDestroy false
// so every step of the plan runs, and a bounded wait for the agent.
func moveInput(src, dst, machine string) workflows.MigrateMachineInput {
	destroy := false
	return workflows.MigrateMachineInput{SourceRegion: src, TargetRegion: dst, Machine: machine, SkipMachineDestroy: &destroy, AgentCheckInTimeout: 90 * time.Second}
}

// startMove starts every workflow of the harness (MigrateMachine, BulkMigrate, TransferRack)
// the way an operator does: with a grant the source region issues to the stack's admin for
// this move, and under the canonical workflow ID.
func startMove(ctx context.Context, s *dev.Stack, in any) (client.WorkflowRun, error) {
	issue := func(source string, req api.GrantRequest) (string, error) {
		g, err := regionClient(s, source).IssueGrant(ctx, req)
		if err != nil {
			return "", fmt.Errorf("grant from %s for %+v: %w", source, req, err)
		}
		return g.Token, nil
	}
	var err error
	switch in := in.(type) {
	case workflows.MigrateMachineInput:
		if in.Grant, err = issue(in.SourceRegion, api.GrantRequest{Kind: api.GrantMachine, Key: in.Machine, TargetRegion: in.TargetRegion}); err != nil {
			return nil, err
		}
		return s.Client.ExecuteWorkflow(ctx, workflows.MigrateMachineStartOptions(in.Machine), workflows.MigrateMachine, in)
	case workflows.BulkMigrateInput:
		sel := api.GrantSelector{Pool: in.Selector.Pool, Rack: in.Selector.Rack, Names: in.Selector.Names}
		if in.Grant, err = issue(in.SourceRegion, api.GrantRequest{Kind: api.GrantBulk, Selector: sel, TargetRegion: in.TargetRegion}); err != nil {
			return nil, err
		}
		return s.Client.ExecuteWorkflow(ctx, workflows.BulkMigrateStartOptions("killpoint-"+strings.Join(in.Selector.Names, "-")), workflows.BulkMigrate, in)
	case workflows.TransferRackInput:
		if in.Grant, err = issue(in.SourceRegion, api.GrantRequest{Kind: api.GrantRack, Key: in.Rack, TargetRegion: in.TargetRegion}); err != nil {
			return nil, err
		}
		return s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.TransferRackID(in.Rack), TaskQueue: workflows.TaskQueue}, workflows.TransferRack, in)
	}
	return nil, fmt.Errorf("no workflow for input %T", in)
}

// closedRun waits for a workflow run in the background.
type closedRun struct {
	run  client.WorkflowRun
	done chan struct{}
	err  error
}

func watch(run client.WorkflowRun) *closedRun {
	c := &closedRun{run: run, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = run.Get(context.Background(), nil)
	}()
	return c
}

func (c *closedRun) closedWithin(d time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(d):
		return false
	}
}

// finish waits for the move to end; one that has not ended by the configured bound is a
// violation, and is cancelled (then terminated) so the next run starts clean.
func (e *killEnv) finish(rep *runReport, c *closedRun) {
	if c.closedWithin(e.cfg.finish) {
		rep.outcome = describeOutcome(c.err)
		return
	}
	rep.violate("the move had not ended %s after the fault", e.cfg.finish)
	ctx := context.Background()
	_ = e.s.Client.CancelWorkflow(ctx, c.run.GetID(), "")
	rep.faultNote += "; the harness cancelled the stuck move"
	if !c.closedWithin(2 * time.Minute) {
		_ = e.s.Client.TerminateWorkflow(ctx, c.run.GetID(), "", "kill-point harness: stuck after cancel")
		<-c.done
		rep.faultNote += ", then terminated it"
	}
	rep.outcome = describeOutcome(c.err)
}

// describeOutcome names a workflow's close: completed, canceled, terminated, or failed with
// its application error type.
func describeOutcome(err error) string {
	var canceled *temporal.CanceledError
	var terminated *temporal.TerminatedError
	var app *temporal.ApplicationError
	switch {
	case err == nil:
		return "completed"
	case errors.As(err, &canceled):
		return "canceled"
	case errors.As(err, &terminated):
		return "terminated"
	case errors.As(err, &app):
		return "failed:" + app.Type()
	}
	return "failed: " + err.Error()
}

// movedPerOutcome says where the outcome says the moved thing is: the target for a completed
// move (or one that failed after its commit point), the source for a move undone; "" when the
// outcome claims neither (a compensation that failed, a termination).
func movedPerOutcome(outcome string, ids moveIDs) string {
	switch outcome {
	case "completed", "failed:" + workflows.ErrTypeAfterActivation:
		return ids.dst
	case "failed:" + workflows.ErrTypeCompensationFailed, "terminated":
		return ""
	}
	if outcome == "canceled" || strings.HasPrefix(outcome, "failed:") {
		return ids.src
	}
	return ""
}

// applyFault does f while the trap holds the move's step, then lets the step go on. run is
// the move itself (the child for terminate-parent), parent the workflow terminate-parent ends.
func (e *killEnv) applyFault(ctx context.Context, rep *runReport, tr *trap, f fault, ids moveIDs, run *closedRun, parent client.WorkflowRun) {
	switch f {
	case faultKillWorker:
		e.stopWorker(syscall.SIGKILL)
		e.startWorker()
		rep.faultNote = "worker killed with the step's request in flight"
		tr.Release()
	case faultCancel, faultCancelInUndo, faultTerminateParent, faultTerminateTransfer:
		if f == faultCancelInUndo {
			tr.releaseBeforeNextChange()
		}
		if f == faultCancel || f == faultCancelInUndo {
			if err := e.s.Client.CancelWorkflow(ctx, run.run.GetID(), ""); err != nil {
				rep.violate("cancel %s: %v", run.run.GetID(), err)
			}
		} else if err := e.s.Client.TerminateWorkflow(ctx, parent.GetID(), parent.GetRunID(), "kill-point harness"); err != nil {
			rep.violate("terminate %s: %v", parent.GetID(), err)
		}
		// The held request goes on once the workflow dropped it (its activity was cancelled),
		// ended, or after the grace a slow undo gets: whichever comes first; for
		// cancel-in-undo, also just before the move's next change reaches a region. A move
		// that waits for its step makes no change before that: it goes after the grace.
		select {
		case <-tr.answered:
			rep.faultNote = "the step's request landed just before the move's next change"
		case <-tr.abandoned:
			rep.faultNote = "the step's request was abandoned"
		case <-run.done:
			rep.faultNote = "the move ended while its step's request was held"
		case <-time.After(e.cfg.release):
			rep.faultNote = fmt.Sprintf("the step's request released %s after the fault", e.cfg.release)
		}
		tr.Release()
	case faultDeleteSource, faultDeleteTarget:
		region := ids.src
		if f == faultDeleteTarget {
			region = ids.dst
		}
		err := e.region(region).Machines().Delete(ctx, ids.machine, false)
		rep.faultNote = "DELETE on " + region + ": " + deleteAnswer(err)
		tr.Release()
	case faultStopSource, faultStopTarget:
		region := ids.src
		if f == faultStopTarget {
			region = ids.dst
		}
		if err := e.s.StopRegion(region); err != nil {
			rep.violate("stop %s: %v", region, err)
		}
		tr.Release()
		time.Sleep(e.cfg.outage) // the outage itself: the move meets it and must ride it out
		if err := e.s.StartRegion(region); err != nil {
			rep.violate("harness: restart %s: %v", region, err)
		}
		rep.faultNote = fmt.Sprintf("%s down for %s", region, e.cfg.outage)
	}
}

func deleteAnswer(err error) string {
	var apiErr *regionclient.APIError
	var queued *regionclient.QueuedError
	switch {
	case err == nil:
		return "accepted"
	case errors.As(err, &queued):
		// The machine's rack is paused for its transfer: the delete runs where the rack
		// lives once the transfer ends, so it is accepted all the same.
		return queued.Error() + ": accepted"
	case errors.As(err, &apiErr):
		return fmt.Sprintf("HTTP %d %s", apiErr.StatusCode, apiErr.Message)
	}
	return err.Error()
}

func deleteAccepted(note string) bool { return strings.HasSuffix(note, ": accepted") }

// awaitHold waits until the trap holds the step's request; a move that ends first, or never
// gets there, did not reach the point.
func awaitHold(tr *trap, run *closedRun, within time.Duration) bool {
	select {
	case <-tr.held:
		return true
	case <-run.done:
		return tr.isHeld()
	case <-time.After(within):
		return false
	}
}

// liveness is where a machine is live, and what every region holds of it.
type liveness struct {
	live    []string
	records map[string]api.Machine
}

// machineLiveness reads the machine on both regions. A record is live when it is unlocked,
// no redirect stub, and runnable or quiesced (a quiesce left behind is reported); a record
// that is neither live nor a locked or unavailable copy is reported as half-live.
func (e *killEnv) machineLiveness(ctx context.Context, rep *runReport, machine string) liveness {
	l := liveness{records: map[string]api.Machine{}}
	for _, name := range dev.RegionNames {
		m, err := e.region(name).Machines().Get(ctx, machine)
		var apiErr *regionclient.APIError
		switch {
		case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound:
			continue
		case err != nil:
			rep.violate("read machine %s on %s: %v", machine, name, err)
			continue
		}
		l.records[name] = m
		held := m.Meta[api.MetaMigrating]
		switch {
		case !m.Locked && m.Meta[api.MetaRedirectEndpoint] == "" && (m.Runnable || held != ""):
			// The machine itself, possibly stuck in a quiesce no move will end.
			l.live = append(l.live, name)
			if held != "" {
				rep.violate("machine %s on %s is still quiesced by %s after the move ended (Runnable=%v)", machine, name, held, m.Runnable)
			}
		case m.Runnable || (!m.Locked && m.Available):
			rep.violate("machine %s half-live on %s: Runnable=%v Locked=%v Available=%v Meta=%v", machine, name, m.Runnable, m.Locked, m.Available, m.Meta)
		}
	}
	return l
}

// jobsOf maps the UUIDs of a machine's jobs on a region to the length of their logs.
func jobsOf(ctx context.Context, c *regionclient.Client, machine string) (map[string]int, error) {
	jobs, err := c.Jobs().List(ctx, url.Values{"Machine": {machine}})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, j := range jobs {
		log, err := c.JobLog(ctx, j.Uuid)
		if err != nil {
			return nil, fmt.Errorf("log of job %s: %w", j.Uuid, err)
		}
		out[j.Uuid] = len(log)
	}
	return out, nil
}

// runJob has the machine's agent run the hello task through region and reports whether the
// job finished within the bound: the agent reaches the region.
func runJob(ctx context.Context, c *regionclient.Client, machine string, within time.Duration) error {
	job, err := c.Jobs().Create(ctx, api.Job{Machine: machine, Task: helloTask.Name, State: api.JobCreated})
	if err != nil {
		return fmt.Errorf("create a job: %w", err)
	}
	var failed error
	if complaint := testutil.Poll(within, func() string {
		j, err := c.Jobs().Get(ctx, job.Uuid)
		switch {
		case err == nil && j.State == api.JobFinished:
			return ""
		case err == nil && j.State == api.JobFailed:
			failed = fmt.Errorf("job %s failed: %s", j.Uuid, j.ExitState)
			return ""
		}
		return fmt.Sprintf("job %s not finished within %s (last %s, %v)", job.Uuid, within, j.State, err)
	}); complaint != "" {
		return errors.New(complaint)
	}
	return failed
}

// runMachine migrates a fresh machine with a real agent and two finished jobs from region-a
// to region-b, holds it at the run's point, applies the fault, lets it end and checks the
// invariants.
func (e *killEnv) runMachine(t *testing.T, kr killRun, n int) runReport {
	rep := runReport{run: kr}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ids := moveIDs{src: "region-a", dst: "region-b"}
	src := e.region(ids.src)
	m := agentMachine(t, src, api.Machine{Name: fmt.Sprintf("kp%d-%d", os.Getpid(), n), OS: "ubuntu-24.04"})
	ids.machine = m.Uuid
	cfgPath := filepath.Join(t.TempDir(), "agent.yaml")
	agentConfigFile(t, cfgPath, m, e.s.Regions[ids.src].URL)
	stopAgent := startAgent(t, cfgPath)
	defer stopAgent()
	for range 2 {
		if err := runJob(ctx, src, m.Uuid, 30*time.Second); err != nil {
			t.Fatalf("job before the move: %v", err)
		}
	}
	jobsBefore, err := jobsOf(ctx, src, m.Uuid)
	if err != nil {
		t.Fatal(err)
	}

	tr := newTrap(kr.point.calls(ids)...)
	e.box.arm(tr)
	defer tr.Release()
	in := moveInput(ids.src, ids.dst, m.Uuid)
	var started0 client.WorkflowRun
	if kr.fault == faultTerminateParent {
		started0, err = startMove(ctx, e.s, workflows.BulkMigrateInput{SourceRegion: ids.src, TargetRegion: ids.dst, Selector: activities.Selector{Names: []string{m.Name}}, SkipMachineDestroy: in.SkipMachineDestroy})
	} else {
		started0, err = startMove(ctx, e.s, in)
	}
	if err != nil {
		t.Fatal(err)
	}
	first := watch(started0)
	if rep.reached = awaitHold(tr, first, 2*time.Minute); !rep.reached {
		e.notReached(&rep, tr, first)
		return rep
	}
	move := first
	if kr.fault == faultTerminateParent {
		move = watch(e.s.Client.GetWorkflow(ctx, workflows.MigrateMachineID(m.Uuid), ""))
	}
	e.applyFault(ctx, &rep, tr, kr.fault, ids, move, started0)
	e.finish(&rep, move)
	if kr.fault == faultTerminateParent {
		first.closedWithin(time.Minute)
	}
	tr.settled(time.Minute)

	e.checkMachine(ctx, &rep, kr, ids, cfgPath, jobsBefore)
	return rep
}

// notReached records a move that ended, or did not get to the point in time, and lets it end.
func (e *killEnv) notReached(rep *runReport, tr *trap, c *closedRun) {
	why := "it did not get there in time"
	select {
	case <-c.done:
		why = "it ended first"
	default:
	}
	tr.Release()
	e.finish(rep, c)
	rep.outcome = "point not reached, " + why + ": " + rep.outcome
}

// deletedRecord is what a delete fault of kr deletes.
func deletedRecord(kr killRun) record {
	switch kr.fault {
	case faultDeleteSource:
		return kr.point.src
	case faultDeleteTarget:
		return kr.point.dst
	}
	return recordNone
}

// checkMachine asserts the invariants after a machine run: live on exactly one region (or
// nowhere, when an operator deleted it before the move held it), where the outcome says; the
// agent there; every job and log kept; and a later move of it accepted and completed.
func (e *killEnv) checkMachine(ctx context.Context, rep *runReport, kr killRun, ids moveIDs, cfgPath string, jobsBefore map[string]int) {
	deletedByOperator := false
	if deleteAccepted(rep.faultNote) {
		switch deletedRecord(kr) {
		case recordHeld:
			rep.violate("the delete of a record the migration held was accepted")
		case recordLive:
			deletedByOperator = true
		case recordMoved:
			e.checkDeletedAfterCommit(ctx, rep, ids.machine)
			return
		}
	}
	l := e.machineLiveness(ctx, rep, ids.machine)
	if deletedByOperator {
		if len(l.live) > 0 {
			rep.violate("machine deleted on the source before the move held it is live on %v", l.live)
		}
		switch rep.outcome {
		case "completed":
			rep.violate("the move of a deleted machine completed")
		case "failed:" + workflows.ErrTypeCompensationFailed:
			rep.violate("the move of a deleted machine reports a failed undo, with nothing left to undo")
		}
		return
	}
	if len(l.live) != 1 {
		rep.violate("machine live on %d regions %v, want exactly one (records: %v)", len(l.live), l.live, describeRecords(l.records))
		return
	}
	home := l.live[0]
	if want := movedPerOutcome(rep.outcome, ids); want == "" {
		rep.violate("outcome %q says neither moved nor undone; machine live on %s", rep.outcome, home)
	} else if want != home {
		rep.violate("outcome %q says the machine is on %s, it is live on %s", rep.outcome, want, home)
	}
	e.checkJobs(ctx, rep, home, ids.machine, jobsBefore)
	e.checkAgent(ctx, rep, home, ids.machine, cfgPath, l)
	e.checkLaterMove(ctx, rep, home, ids.machine)
}

// checkDeletedAfterCommit: the operator deleted the machine where the move had activated it;
// the move completes and leaves nothing behind (no stub redirecting to a machine that is gone).
func (e *killEnv) checkDeletedAfterCommit(ctx context.Context, rep *runReport, machine string) {
	if rep.outcome != "completed" {
		rep.violate("the move of a machine deleted after its commit point ended %q, want completed", rep.outcome)
	}
	if l := e.machineLiveness(ctx, rep, machine); len(l.records) > 0 {
		rep.violate("the machine deleted on the target after the commit point left records: %s", describeRecords(l.records))
	}
}

func describeRecords(records map[string]api.Machine) string {
	var parts []string
	for _, name := range dev.RegionNames {
		if m, ok := records[name]; ok {
			parts = append(parts, fmt.Sprintf("%s: Runnable=%v Locked=%v Available=%v Meta=%v", name, m.Runnable, m.Locked, m.Available, m.Meta))
		} else {
			parts = append(parts, name+": none")
		}
	}
	return strings.Join(parts, "; ")
}

// checkJobs: every job the machine had before the move is on its region now, with its log.
func (e *killEnv) checkJobs(ctx context.Context, rep *runReport, home, machine string, before map[string]int) {
	after, err := jobsOf(ctx, e.region(home), machine)
	if err != nil {
		rep.violate("jobs on %s: %v", home, err)
		return
	}
	for id, size := range before {
		got, ok := after[id]
		switch {
		case !ok:
			rep.violate("job %s lost: not on %s", id, home)
		case got < size:
			rep.violate("log of job %s on %s is %d bytes, was %d", id, home, got, size)
		}
	}
}

// checkAgent: the agent's config names the region where the machine is live, or a region
// whose stub redirects there; and the agent runs a job created there.
func (e *killEnv) checkAgent(ctx context.Context, rep *runReport, home, machine, cfgPath string, l liveness) {
	cfg, err := agent.LoadConfig(cfgPath)
	if err != nil {
		rep.violate("agent config: %v", err)
		return
	}
	homeURL := e.s.Regions[home].URL
	if len(cfg.Endpoints) == 0 || cfg.Endpoints[0] != homeURL {
		first := ""
		if len(cfg.Endpoints) > 0 {
			first = cfg.Endpoints[0]
		}
		other := otherRegion(home)
		stub, ok := l.records[other]
		if first != e.s.Regions[other].URL || !ok || stub.Meta[api.MetaRedirectEndpoint] != homeURL {
			rep.violate("agent config names %v, machine live on %s (%s) and no stub redirects there", cfg.Endpoints, home, homeURL)
		}
	}
	if err := runJob(ctx, e.region(home), machine, 30*time.Second); err != nil {
		rep.violate("the agent does not reach %s, where its machine is live: %v", home, err)
	}
}

// checkLaterMove: nothing the run left (an orphan copy, a held stub) blocks the next move.
func (e *killEnv) checkLaterMove(ctx context.Context, rep *runReport, home, machine string) {
	e.box.arm(nil)
	dst := otherRegion(home)
	run, err := startMove(ctx, e.s, moveInput(home, dst, machine))
	if err != nil {
		rep.violate("a later move %s→%s was not accepted: %v", home, dst, err)
		return
	}
	later := watch(run)
	if !later.closedWithin(3 * time.Minute) {
		rep.violate("a later move %s→%s did not end within 3m", home, dst)
		_ = e.s.Client.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "kill-point harness: later move stuck")
		<-later.done
		return
	}
	if later.err != nil {
		rep.violate("a later move %s→%s failed: %v", home, dst, later.err)
		return
	}
	var lrep runReport
	if l := e.machineLiveness(ctx, &lrep, machine); len(l.live) != 1 || l.live[0] != dst {
		rep.violate("after a later move to %s the machine is live on %v", dst, l.live)
	}
}

// runRack transfers rack-a from the region it lives on to the other, holds it at the run's
// point, applies the fault, lets it end and checks the invariants on the rack and on each of
// its machines.
func (e *killEnv) runRack(t *testing.T, kr killRun) runReport {
	rep := runReport{run: kr}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if !e.findRack(ctx) {
		e.restart(t)
		if !e.findRack(ctx) {
			t.Fatal("rack-a is online on no region of a fresh stack")
		}
	}
	ids := moveIDs{src: e.rackHome, dst: otherRegion(e.rackHome), rack: e.s.Racks["rack-a"].Uuid}
	machines, err := e.region(ids.src).Machines().List(ctx, url.Values{"Rack": {ids.rack}})
	if err != nil || len(machines) == 0 {
		t.Fatalf("machines behind rack-a on %s: %d (%v)", ids.src, len(machines), err)
	}
	for _, m := range machines {
		if !e.gone[m.Uuid] {
			ids.machine = m.Uuid
			break
		}
	}

	tr := newTrap(kr.point.calls(ids)...)
	e.box.arm(tr)
	defer tr.Release()
	run, err := startMove(ctx, e.s, workflows.TransferRackInput{SourceRegion: ids.src, TargetRegion: ids.dst, Rack: ids.rack})
	if err != nil {
		t.Fatal(err)
	}
	move := watch(run)
	if rep.reached = awaitHold(tr, move, 5*time.Minute); !rep.reached {
		e.notReached(&rep, tr, move)
		return rep
	}
	held := move // what the release after a termination waits for: the transfer, or the held child
	if kr.fault == faultTerminateTransfer {
		held = watch(e.s.Client.GetWorkflow(ctx, workflows.MigrateMachineID(ids.machine), ""))
	}
	e.applyFault(ctx, &rep, tr, kr.fault, ids, held, run)
	e.finish(&rep, move)
	children := e.childOutcomes(ctx, &rep, run, machines)
	tr.settled(time.Minute)

	if deleteAccepted(rep.faultNote) && deletedRecord(kr) == recordLive {
		// The operator deleted the machine where it was live; the other region may keep its stub.
		e.gone[ids.machine] = true
	}
	var lost bool
	for _, m := range machines {
		if e.gone[m.Uuid] {
			continue
		}
		l := e.machineLiveness(ctx, &rep, m.Uuid)
		if len(l.live) != 1 {
			lost = true
			rep.violate("machine %s live on %v, want exactly one region (%s)", m.Name, l.live, describeRecords(l.records))
			continue
		}
		if outcome, ok := children[m.Uuid]; ok {
			if want := movedPerOutcome(outcome, ids); want != l.live[0] {
				rep.violate("machine %s: its migration's outcome %q says %q, it is live on %s", m.Name, outcome, want, l.live[0])
			}
		}
	}
	terminated := kr.fault == faultTerminateParent || kr.fault == faultTerminateTransfer
	if terminated {
		// A terminated transfer runs none of its own undos: the operator recovers what it left
		// (`ironflow racks recover`), after which the rack is held nowhere and online on one region.
		e.box.arm(nil)
		e.recoverRack(ctx, &rep, ids)
	}
	owner := e.rackOwner(ctx, &rep, ids.rack)
	switch want := movedPerOutcome(rep.outcome, ids); {
	case want == "" && !terminated:
		rep.violate("outcome %q says neither moved nor undone", rep.outcome)
	case want != "" && owner != "" && want != owner:
		rep.violate("outcome %q says the rack is on %s, it serves from %s", rep.outcome, want, owner)
	}
	if owner == "" || lost {
		return rep
	}
	e.rackHome = owner
	e.box.arm(nil)
	back, err := startMove(ctx, e.s, workflows.TransferRackInput{SourceRegion: owner, TargetRegion: otherRegion(owner), Rack: ids.rack})
	if err != nil {
		rep.violate("a later transfer from %s was not accepted: %v", owner, err)
		return rep
	}
	later := watch(back)
	switch {
	case !later.closedWithin(5 * time.Minute):
		rep.violate("a later transfer from %s did not end within 5m", owner)
		_ = e.s.Client.TerminateWorkflow(ctx, back.GetID(), back.GetRunID(), "kill-point harness: later transfer stuck")
		<-later.done
	case later.err != nil:
		rep.violate("a later transfer from %s failed: %v", owner, later.err)
	default:
		e.rackHome = otherRegion(owner)
	}
	return rep
}

// findRack sets rackHome to the region where rack-a is online, waiting up to 30 s; an
// earlier run may have left a copy of it behind, or left it paused everywhere (false).
func (e *killEnv) findRack(ctx context.Context) bool {
	rack := e.s.Racks["rack-a"].Uuid
	return testutil.Poll(30*time.Second, func() string {
		for _, name := range []string{e.rackHome, otherRegion(e.rackHome)} {
			if r, err := e.region(name).Racks().Get(ctx, rack); err == nil && r.Status == api.RackOnline {
				e.rackHome = name
				return ""
			}
		}
		return "rack-a online nowhere"
	}) == ""
}

// childOutcomes waits for the machine migrations the transfer run started and returns their
// outcomes by machine; a child still running after the configured bound is a violation.
func (e *killEnv) childOutcomes(ctx context.Context, rep *runReport, transfer client.WorkflowRun, machines []api.Machine) map[string]string {
	out := map[string]string{}
	for _, m := range machines {
		id := workflows.MigrateMachineID(m.Uuid)
		desc, err := e.s.Client.DescribeWorkflowExecution(ctx, id, "")
		if err != nil || desc.GetWorkflowExecutionInfo().GetParentExecution().GetRunId() != transfer.GetRunID() {
			continue // never started by this transfer
		}
		c := watch(e.s.Client.GetWorkflow(ctx, id, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()))
		if !c.closedWithin(e.cfg.finish) {
			rep.violate("the migration of machine %s had not ended %s after its transfer did", m.Name, e.cfg.finish)
			_ = e.s.Client.TerminateWorkflow(ctx, id, "", "kill-point harness: child stuck")
			<-c.done
		}
		out[m.Uuid] = describeOutcome(c.err)
	}
	e.batchOutcomes(ctx, rep, transfer, out)
	return out
}

// batchOutcomes waits for the MigrateMachineBatch children the transfer started (its
// history names them) and adds each machine's outcome from its batch's result to out.
func (e *killEnv) batchOutcomes(ctx context.Context, rep *runReport, transfer client.WorkflowRun, out map[string]string) {
	events := e.s.Client.GetWorkflowHistory(ctx, transfer.GetID(), transfer.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for events.HasNext() {
		ev, err := events.Next()
		if err != nil {
			rep.violate("history of %s: %v", transfer.GetID(), err)
			return
		}
		started := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes()
		if started.GetWorkflowType().GetName() != "MigrateMachineBatch" {
			continue
		}
		id := started.GetWorkflowId()
		run := e.s.Client.GetWorkflow(ctx, id, "")
		c := watch(run)
		if !c.closedWithin(e.cfg.finish) {
			rep.violate("batch %s had not ended %s after its transfer did", id, e.cfg.finish)
			_ = e.s.Client.TerminateWorkflow(ctx, id, "", "kill-point harness: batch stuck")
			<-c.done
			continue
		}
		var res activities.BatchResult
		if err := run.Get(ctx, &res); err != nil {
			continue // the batch as a whole failed: the liveness checks judge its machines
		}
		for _, m := range res.Moved {
			out[m] = "completed"
		}
		for _, f := range res.Failed {
			switch {
			case !f.Undone:
				out[f.Machine] = "failed:" + workflows.ErrTypeCompensationFailed
			case f.Type == "":
				out[f.Machine] = "canceled"
			default:
				out[f.Machine] = "failed:" + f.Type
			}
		}
	}
}

// rackOwner is the one region where the rack is registered, online within 30 s (its
// controller heartbeats there) and not paused; the rack registered on both regions, or on
// none, or paused, is a violation.
func (e *killEnv) rackOwner(ctx context.Context, rep *runReport, rack string) string {
	var owner string
	if complaint := testutil.Poll(30*time.Second, func() string {
		statuses := map[string]string{}
		for _, name := range dev.RegionNames {
			if r, err := e.region(name).Racks().Get(ctx, rack); err == nil {
				statuses[name] = r.Status
			}
		}
		if len(statuses) == 1 {
			for name, status := range statuses {
				if status == api.RackOnline {
					owner = name
					return ""
				}
			}
		}
		return fmt.Sprintf("rack %s: statuses by region %v, want registered on exactly one region and online there", rack, statuses)
	}); complaint != "" {
		rep.violate("%s", complaint)
	}
	return owner
}

// recoverRack runs the operator's recovery of what a terminated transfer left (the workflow
// `ironflow racks recover` starts) and notes what it did; a failed recovery is a violation.
func (e *killEnv) recoverRack(ctx context.Context, rep *runReport, ids moveIDs) {
	opts := client.StartWorkflowOptions{ID: workflows.TransferRackID(ids.rack), TaskQueue: workflows.TaskQueue}
	run, err := e.s.Client.ExecuteWorkflow(ctx, opts, workflows.RecoverRackTransfer, workflows.RecoverRackInput{Rack: ids.rack, Regions: []string{ids.src, ids.dst}, StartedBy: "kill-point harness"})
	if err != nil {
		rep.violate("start the recovery of rack %s: %v", ids.rack, err)
		return
	}
	var res workflows.RecoverRackResult
	if err := run.Get(ctx, &res); err != nil {
		rep.violate("the recovery of rack %s failed: %v", ids.rack, err)
		return
	}
	for _, r := range res.Recovered {
		rep.faultNote += fmt.Sprintf("; recovered what the transfer left: %s %v", r.Outcome, r.Actions)
	}
}
