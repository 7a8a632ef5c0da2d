package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/region/store"
)

// pausedRack is rackNetwork with the rack paused for a transfer run; it returns the rack,
// its machine, subnet and pod.
func (e *env) pausedRack() (rack, machine, subnet, pod string) {
	e.t.Helper()
	rack, machine = e.rackNetwork()
	hold := api.RackHold{Transfer: "transfer-rack-a", Run: "run-1", From: "region-a", To: "region-b"}
	e.mustDo(asMove, http.MethodPost, "/api/v1/racks/"+rack+"/pause", hold, http.StatusOK)
	subnet = e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/subnets/Name:net-a", nil, http.StatusOK).json(e.t)["Uuid"].(string)
	pod = e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/pods/Name:kvm-a", nil, http.StatusOK).json(e.t)["Uuid"].(string)
	return rack, machine, subnet, pod
}

// queued checks that r is the 202 of a write queued for rack and returns its operation.
func queued(t *testing.T, r response, rack string) api.PendingOperation {
	t.Helper()
	if r.code != http.StatusAccepted {
		t.Fatalf("status %d, want 202: %s", r.code, r.body)
	}
	q := into[api.QueuedWrite](t, r)
	if q.Rack != rack || q.RackName != "rack-a" || q.Transfer.Transfer != "transfer-rack-a" || q.Transfer.To != "region-b" ||
		q.Operation.ID == 0 || q.Operation.Kind != api.OperationWrite || q.Operation.Target != rack {
		t.Fatalf("queued write %+v", q)
	}
	if want := "/api/v1/racks/" + rack + "/operations/"; !strings.HasPrefix(r.header.Get("Location"), want) {
		t.Fatalf("Location %q, want under %s", r.header.Get("Location"), want)
	}
	return q.Operation
}

func itoa(id int64) string { return strconv.FormatInt(id, 10) }

func asQueued(err error, q **client.QueuedError) bool { return errors.As(err, q) }

func (e *env) rackOps(rack string) []api.PendingOperation {
	e.t.Helper()
	ops, err := e.st.RackOperations(context.Background(), rack)
	if err != nil {
		e.t.Fatal(err)
	}
	return ops
}

func (e *env) description(kind, key string) string {
	e.t.Helper()
	d, _ := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/"+kind+"/"+key, nil, http.StatusOK).json(e.t)["Description"].(string)
	return d
}

// Writes that touch a paused rack, its machines and their jobs, its pods and subnets are
// queued, not applied; the end of the pause replays them in order, each once.
func TestWritesTouchingAPausedRackAreQueuedAndReplayed(t *testing.T) {
	e := newEnv(t)
	rack, machine, subnet, pod := e.pausedRack()

	patch := e.do(api.RoleOperator, http.MethodPatch, "/api/v1/machines/"+machine, map[string]any{"Description": "queued"})
	op := queued(t, patch, rack)
	job := queued(t, e.do(api.RoleOperator, http.MethodPost, "/api/v1/jobs", map[string]any{"Machine": machine}), rack)
	queued(t, e.do(api.RoleOperator, http.MethodPatch, "/api/v1/subnets/"+subnet, map[string]any{"LeaseSeconds": 777}), rack)
	queued(t, e.do(api.RoleOperator, http.MethodPatch, "/api/v1/pods/"+pod, map[string]any{"PowerAddress": "qemu:///queued"}), rack)
	queued(t, e.do(api.RoleOperator, http.MethodPatch, "/api/v1/racks/"+rack, map[string]any{"Interfaces": []string{"eth-queued"}}), rack)
	// A new machine put behind the paused rack waits too.
	queued(t, e.do(api.RoleOperator, http.MethodPost, "/api/v1/machines", map[string]any{"Name": "node-new", "Rack": rack}), rack)
	// So do an ad-hoc job and a secret of a machine behind it.
	queued(t, e.do(api.RoleOperator, http.MethodPost, "/api/v1/machines/"+machine+"/run", map[string]any{"Script": "echo queued"}), rack)
	queued(t, e.do(api.RoleOperator, http.MethodPut, "/api/v1/machines/"+machine+"/secrets/queued-key", map[string]any{"Value": "s3cret"}), rack)
	e.do(api.RoleOperator, http.MethodGet, "/api/v1/machines/"+machine+"/secrets/queued-key", nil).apiError(t, http.StatusNotFound)

	if d := e.description(api.KindMachines, machine); d != "" {
		t.Fatalf("machine Description %q while its rack is paused, want the write held", d)
	}
	if jobs := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/jobs?Machine="+machine, nil, http.StatusOK).list(t); len(jobs) != 0 {
		t.Fatalf("jobs %v while the rack is paused", jobs)
	}
	shown := into[api.PendingOperation](t, e.mustDo(api.RoleOperator, http.MethodGet, patch.header.Get("Location"), nil, http.StatusOK))
	if shown.ID != op.ID || shown.Released || shown.Done != nil || shown.Payload["Body"] != `{"Description":"queued"}` || shown.Payload["Method"] != http.MethodPatch {
		t.Fatalf("operation at Location %+v", shown)
	}
	// A body may carry a secret: readonly callers see the write without it.
	if body, ok := into[api.PendingOperation](t, e.mustDo(api.RoleReadonly, http.MethodGet, patch.header.Get("Location"), nil, http.StatusOK)).Payload["Body"]; ok {
		t.Errorf("readonly caller sees the queued body %v", body)
	}
	if ops := e.rackOps(rack); len(ops) != 8 {
		t.Fatalf("%d queued operations, want 8", len(ops))
	}

	if r := into[api.Rack](t, e.mustDo(asMove, http.MethodPost, "/api/v1/racks/"+rack+"/unpause", nil, http.StatusOK)); r.Status == api.RackPaused {
		t.Fatalf("rack after unpause %+v", r)
	}
	if d := e.description(api.KindMachines, machine); d != "queued" {
		t.Errorf("machine Description %q after the pause, want the queued write applied", d)
	}
	if sn := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/subnets/"+subnet, nil, http.StatusOK).json(t); sn["LeaseSeconds"] != 777.0 {
		t.Errorf("subnet after the pause %v", sn)
	}
	if r := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/racks/"+rack, nil, http.StatusOK).json(t); fmt.Sprint(r["Interfaces"]) != "[eth-queued]" {
		t.Errorf("rack after the pause %v", r)
	}
	if p := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/pods/"+pod, nil, http.StatusOK).json(t); p["PowerAddress"] != "qemu:///queued" {
		t.Errorf("pod after the pause %v", p)
	}
	e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/machines/Name:node-new", nil, http.StatusOK)
	if jobs := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/jobs?Machine="+machine, nil, http.StatusOK).list(t); len(jobs) != 2 {
		t.Errorf("jobs after the pause %v, want the queued job and ad-hoc job created once each", jobs)
	}
	if sec := e.mustDo(api.RoleOperator, http.MethodGet, "/api/v1/machines/"+machine+"/secrets/queued-key", nil, http.StatusOK).json(t); sec["Value"] != "s3cret" {
		t.Errorf("secret after the pause %v", sec)
	}
	settled := into[api.PendingOperation](t, e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/racks/"+rack+"/operations/"+itoa(job.ID), nil, http.StatusOK))
	if !settled.Released || settled.Done == nil || settled.Outcome != api.OutcomeApplied {
		t.Errorf("replayed job operation %+v", settled)
	}
	if ops := e.rackOps(rack); len(ops) != 0 {
		t.Errorf("unreleased operations after the pause: %+v", ops)
	}
	events := into[[]api.Event](t, e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/events?Kind=operations&Key="+rack, nil, http.StatusOK))
	replays := 0
	for _, ev := range events {
		if ev.Action == "replay" {
			replays++
			if ev.Actor != "operator-user" {
				t.Errorf("replay event by %q, want the queuing caller", ev.Actor)
			}
		}
	}
	if replays != 8 {
		t.Errorf("%d replay events, want 8: %+v", replays, events)
	}

	// Unpausing again replays nothing twice.
	e.mustDo(asMove, http.MethodPost, "/api/v1/racks/"+rack+"/unpause", nil, http.StatusOK)
	if jobs := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/jobs?Machine="+machine, nil, http.StatusOK).list(t); len(jobs) != 2 {
		t.Errorf("jobs after a second unpause %v", jobs)
	}
}

// The role check comes first, a write that would be refused now is refused now, and writes
// to what is not on a paused rack, or that a move makes, are applied as ever.
func TestQueuedWritesCheckRoleAndInputFirst(t *testing.T) {
	e := newEnv(t)
	rack, machine, _, _ := e.pausedRack()
	path := "/api/v1/machines/" + machine

	e.do(api.RoleReadonly, http.MethodPatch, path, map[string]any{"Description": "x"}).apiError(t, http.StatusForbidden)
	e.do(api.RoleRack, http.MethodPatch, path, map[string]any{"Description": "x"}).apiError(t, http.StatusForbidden)
	e.do("", http.MethodPatch, path, map[string]any{"Description": "x"}).apiError(t, http.StatusUnauthorized)
	e.do(api.RoleOperator, http.MethodPatch, path, `{"Description": `).apiError(t, http.StatusBadRequest)
	e.do(api.RoleOperator, http.MethodPatch, path, map[string]any{"NoSuchField": 1}).apiError(t, http.StatusBadRequest)
	e.do(api.RoleOperator, http.MethodPatch, path, map[string]any{"HardwareAddrs": []string{"not-a-mac"}}).apiError(t, http.StatusUnprocessableEntity)
	e.do(api.RoleOperator, http.MethodPost, "/api/v1/jobs", map[string]any{"Machine": machine, "State": "no-such-state"}).apiError(t, http.StatusUnprocessableEntity)
	e.do(api.RoleOperator, http.MethodPatch, "/api/v1/machines/Name:no-such-machine", map[string]any{"Description": "x"}).apiError(t, http.StatusNotFound)
	if ops := e.rackOps(rack); len(ops) != 0 {
		t.Fatalf("refused writes were queued: %+v", ops)
	}

	// Not on the paused rack: applied.
	other := e.create(api.KindRacks, map[string]any{"Name": "rack-b", "Status": api.RackOnline})["Uuid"].(string)
	elsewhere := e.create(api.KindMachines, map[string]any{"Name": "node-b", "Rack": other})["Uuid"].(string)
	e.mustDo(api.RoleOperator, http.MethodPatch, "/api/v1/machines/"+elsewhere, map[string]any{"Description": "now"}, http.StatusOK)
	e.mustDo(api.RoleOperator, http.MethodPost, "/api/v1/jobs", map[string]any{"Machine": elsewhere}, http.StatusCreated)
	e.mustDo(api.RoleOperator, http.MethodPost, "/api/v1/profiles", map[string]any{"Name": "p1"}, http.StatusCreated)
	if ops := e.rackOps(rack); len(ops) != 0 {
		t.Fatalf("writes off the paused rack were queued: %+v", ops)
	}
	// The move's own writes (the workers' admin tokens) are applied; an operator cannot pass
	// for the move, nor skip the queue with a ?migration= on anything but a DELETE.
	moveWrite := func(role, query, description string) int {
		req, err := http.NewRequest(http.MethodPatch, e.base+path+query, strings.NewReader(`{"Description": "`+description+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+e.tokens[role])
		req.Header.Set(api.HeaderMove, "1")
		return send(t, req).code
	}
	if code := moveWrite(api.RoleOperator, "", "operator as the move"); code != http.StatusAccepted {
		t.Errorf("an operator's write marked as the move: %d, want 202 (queued)", code)
	}
	if code := moveWrite(api.RoleOperator, "?migration=transfer-rack/"+rack, "operator naming the migration"); code != http.StatusAccepted {
		t.Errorf("an operator's PATCH naming the migration: %d, want 202 (queued)", code)
	}
	if d := e.description(api.KindMachines, machine); d == "operator as the move" || d == "operator naming the migration" {
		t.Errorf("machine Description %q: an operator's write skipped the queue", d)
	}
	if code := moveWrite(api.RoleAdmin, "", "by the move"); code != http.StatusOK {
		t.Fatalf("the move's write: %d, want 200", code)
	}
	if d := e.description(api.KindMachines, machine); d != "by the move" {
		t.Errorf("machine Description %q, want the move's write applied", d)
	}
}

// One client cannot fill the database: a queued write's body and a rack's queue are bounded.
func TestQueuedWritesAreBounded(t *testing.T) {
	e := newEnv(t)
	rack, machine, _, _ := e.pausedRack()
	path := "/api/v1/machines/" + machine

	big := map[string]any{"Description": strings.Repeat("x", api.MaxQueuedWriteBody)}
	msg := e.do(api.RoleOperator, http.MethodPatch, path, big).apiError(t, http.StatusRequestEntityTooLarge)
	if !strings.Contains(msg, "rack-a is paused") {
		t.Errorf("413 message %q does not say why", msg)
	}
	ctx := context.Background()
	by := store.Principal{User: "filler", Role: api.RoleOperator}
	for range api.MaxQueuedOperations - 1 {
		if err := e.st.QueueRackOperation(ctx, by, rack, &api.PendingOperation{Target: rack, Kind: "power-on"}); err != nil {
			t.Fatal(err)
		}
	}
	queued(t, e.do(api.RoleOperator, http.MethodPatch, path, map[string]any{"Description": "last"}), rack)
	msg = e.do(api.RoleOperator, http.MethodPatch, path, map[string]any{"Description": "one too many"}).apiError(t, http.StatusTooManyRequests)
	if !strings.Contains(msg, "rack-a already has 1000 queued operations") {
		t.Errorf("429 message %q", msg)
	}
	// The explicit queue shares the cap.
	_, err := client.New(e.base, e.tokens[api.RoleOperator]).QueueRackOperation(ctx, rack, api.PendingOperation{Target: machine, Kind: "power-on"})
	if statusOf(err) != http.StatusTooManyRequests {
		t.Errorf("explicit queue past the cap: %v, want 429", err)
	}
	if ops := e.rackOps(rack); len(ops) != api.MaxQueuedOperations {
		t.Errorf("%d queued operations, want the cap %d", len(ops), api.MaxQueuedOperations)
	}
}

// A queued write whose replay fails is settled with its error and audited; the writes after
// it still run.
func TestFailedReplayDoesNotBlockTheOthers(t *testing.T) {
	e := newEnv(t)
	rack, machine, _, _ := e.pausedRack()
	path := "/api/v1/machines/" + machine
	first := queued(t, e.do(api.RoleOperator, http.MethodPatch, path, map[string]any{"Name": "node-renamed"}), rack)
	queued(t, e.do(api.RoleOperator, http.MethodPatch, path, map[string]any{"Description": "second"}), rack)
	// Meanwhile the name is taken off the paused rack, so the first write conflicts on replay.
	e.create(api.KindMachines, map[string]any{"Name": "node-renamed"})

	e.mustDo(asMove, http.MethodPost, "/api/v1/racks/"+rack+"/unpause", nil, http.StatusOK)
	m := e.mustDo(api.RoleReadonly, http.MethodGet, path, nil, http.StatusOK).json(t)
	if m["Name"] != "node-1" || m["Description"] != "second" {
		t.Errorf("machine after replay: Name %v, Description %v; want the rename refused and the second write applied", m["Name"], m["Description"])
	}
	failed := into[api.PendingOperation](t, e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/racks/"+rack+"/operations/"+itoa(first.ID), nil, http.StatusOK))
	if failed.Done == nil || !strings.HasPrefix(failed.Outcome, "409 Conflict: ") || !strings.Contains(failed.Outcome, "node-renamed") {
		t.Errorf("failed replay settled as %+v", failed)
	}
	events := into[[]api.Event](t, e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/events?Kind=operations&Key="+rack, nil, http.StatusOK))
	found := false
	for _, ev := range events {
		if ev.Action == "replay" && ev.Details["Outcome"] == failed.Outcome {
			found = true
		}
	}
	if !found {
		t.Errorf("no replay event with the failure among %+v", events)
	}
}

// copyPausedRack is a rack paused on a source region and copied (bundle, with hold when given)
// to a target region, with its machine as its migration leaves it on the target (a move's
// write: not queued); a and b are the move's clients of the source and the target.
func copyPausedRack(t *testing.T, hold *api.RackHold) (src, dst *env, a, b *client.Client, rack, machine string, bundle api.RackBundle) {
	t.Helper()
	ctx := context.Background()
	src, dst = newEnv(t), newEnv(t)
	a, b = client.New(src.base, src.tokens[api.RoleAdmin], client.AsMove()), client.New(dst.base, dst.tokens[api.RoleAdmin], client.AsMove())
	rack, machine, _, _ = src.pausedRack()
	var err error
	if bundle, err = a.ExportRack(ctx, rack); err != nil {
		t.Fatal(err)
	}
	if hold != nil {
		bundle.Hold = hold
	}
	if _, err := b.ImportRack(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	if err := dst.st.Create(ctx, store.Principal{User: "worker", Role: api.RoleOperator}, api.KindMachines, &api.Machine{Uuid: machine, Name: "node-1", Rack: rack}); err != nil {
		t.Fatal(err)
	}
	return src, dst, a, b, rack, machine, bundle
}

// A hand-over carries the queued writes to the target, which replays them when its pause
// ends; the source settles them as handed over and never runs them.
func TestQueuedWritesFollowTheRackToItsNewRegion(t *testing.T) {
	src, dst, a, b, rack, machine, _ := copyPausedRack(t, nil)
	ctx := context.Background()

	_, err := client.New(src.base, src.tokens[api.RoleOperator]).Machines().Patch(ctx, machine, []byte(`{"Description": "moved along"}`))
	var q *client.QueuedError
	if !asQueued(err, &q) || q.Queued.Rack != rack || !strings.Contains(err.Error(), "queued until the rack transfer of rack-a") {
		t.Fatalf("client on a paused rack's machine: %v, want a *client.QueuedError", err)
	}
	if err := a.HandOverRack(ctx, rack); err != nil {
		t.Fatal(err)
	}
	ops, err := a.RackOperations(ctx, rack)
	if err != nil || len(ops) != 1 {
		t.Fatalf("operations on the source: %+v, %v", ops, err)
	}
	if _, err := b.ReleaseRackOperations(ctx, rack, api.OperationsRelease{Origin: "region-a", Operations: ops}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReleaseRackOperations(ctx, rack, api.OperationsRelease{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.UnpauseRack(ctx, rack); err != nil {
		t.Fatal(err)
	}
	if d := dst.description(api.KindMachines, machine); d != "moved along" {
		t.Errorf("machine Description on the target %q, want the queued write", d)
	}
	if d := src.description(api.KindMachines, machine); d != "" {
		t.Errorf("machine Description on the source %q, want it untouched", d)
	}
	left, err := a.RackOperation(ctx, rack, q.Queued.Operation.ID)
	if err != nil || left.Outcome != api.OutcomeHandedOver {
		t.Errorf("source's operation %+v, %v; want it settled as handed over", left, err)
	}
	// The rack comes back: the source does not run the write it handed over.
	back, err := b.ExportRack(ctx, rack)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.ImportRack(ctx, back); err != nil {
		t.Fatal(err)
	}
	if _, err := a.UnpauseRack(ctx, rack); err != nil {
		t.Fatal(err)
	}
	if d := src.description(api.KindMachines, machine); d != "" {
		t.Errorf("machine Description on the source after the rack came back %q, want the handed-over write not run there", d)
	}
}

// Writes queued on a transfer's target for its copy of the rack are dropped with the copy
// when the transfer is undone: they never run there, not even when the rack comes later.
func TestQueuedWritesOnAnUndoneCopyAreDropped(t *testing.T) {
	_, dst, _, b, rack, machine, bundle := copyPausedRack(t, &api.RackHold{Transfer: "transfer-rack-a", Run: "run-1", From: "region-a", To: "region-b"})
	ctx := context.Background()
	op := queued(t, dst.do(api.RoleOperator, http.MethodPatch, "/api/v1/machines/"+machine, map[string]any{"Description": "on the copy"}), rack)
	if err := b.UndoRackImport(ctx, rack); err != nil {
		t.Fatal(err)
	}
	dropped, err := dst.st.PendingOperations(ctx, rack)
	if err != nil || len(dropped) != 0 {
		t.Errorf("unreleased operations on the target after the undo: %+v, %v", dropped, err)
	}
	if _, err := b.ImportRack(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	if _, err := b.UnpauseRack(ctx, rack); err != nil {
		t.Fatal(err)
	}
	if d := dst.description(api.KindMachines, machine); d != "" {
		t.Errorf("machine Description on the target %q, want the dropped write never run", d)
	}
	left, err := b.RackOperation(ctx, rack, op.ID)
	if err != nil || left.Outcome != api.OutcomeDropped {
		t.Errorf("operation after the undo %+v, %v; want it dropped", left, err)
	}
}

// An undone transfer ends the pause on the source, which then runs the writes itself.
func TestQueuedWritesRunOnTheSourceWhenTheTransferIsUndone(t *testing.T) {
	e := newEnv(t)
	rack, machine, _, _ := e.pausedRack()
	queued(t, e.do(api.RoleOperator, http.MethodPatch, "/api/v1/machines/"+machine, map[string]any{"Description": "after undo"}), rack)
	e.mustDo(asMove, http.MethodPost, "/api/v1/racks/"+rack+"/recover",
		api.RackRecovery{Hold: api.RackHold{Transfer: "transfer-rack-a", Run: "run-1", Role: api.TransferSource, From: "region-a", To: "region-b"},
			Action: api.RecoverUnpause, Outcome: api.RecoveryUndone, RecoveredBy: "test"}, http.StatusOK)
	if d := e.description(api.KindMachines, machine); d != "after undo" {
		t.Errorf("machine Description %q after the undo, want the queued write applied", d)
	}
}

// Two requests that end the pause at once (a retried unpause) replay each queued write once,
// and the last queued write is the one that stands.
func TestConcurrentUnpausesReplayEachWriteOnce(t *testing.T) {
	e := newEnv(t)
	rack, machine, _, _ := e.pausedRack()
	const n = 30
	for i := range n {
		queued(t, e.do(api.RoleOperator, http.MethodPatch, "/api/v1/machines/"+machine, map[string]any{"Description": itoa(int64(i))}), rack)
	}
	done := make(chan error, 2)
	for range 2 {
		go func() {
			req, err := http.NewRequest(http.MethodPost, e.base+"/api/v1/racks/"+rack+"/unpause", nil)
			if err != nil {
				done <- err
				return
			}
			req.Header.Set("Authorization", "Bearer "+e.tokens[api.RoleAdmin])
			req.Header.Set(api.HeaderMove, "1")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("unpause: %v", err)
		}
	}
	if d := e.description(api.KindMachines, machine); d != itoa(n-1) {
		t.Errorf("machine Description %q after the replays, want the last queued write's %q", d, itoa(n-1))
	}
	events := into[[]api.Event](t, e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/events?Kind=machines&Key="+machine, nil, http.StatusOK))
	updates := 0
	for _, ev := range events {
		if ev.Action == "update" {
			updates++
		}
	}
	if updates != n {
		t.Errorf("%d updates of the machine, want each of the %d queued writes once", updates, n)
	}
}
