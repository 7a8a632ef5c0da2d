package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// outcomeOf is the outcome of the rack's operation id, as an admin reads it.
func (e *env) outcomeOf(rack string, id int64) api.PendingOperation {
	e.t.Helper()
	return into[api.PendingOperation](e.t.(*testing.T), e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/racks/"+rack+"/operations/"+itoa(id), nil, http.StatusOK))
}

// Nothing in a request body names who a queued write runs as: the explicit queue takes no
// writes, a queued write records the authenticated caller, and only the move releases a
// queue, so an operator cannot have a write replayed as an admin.
func TestQueuedWritesRunAsTheirAuthenticatedCaller(t *testing.T) {
	e := newEnv(t)
	rack, machine, _, _ := e.pausedRack()
	forged := map[string]any{"Method": http.MethodPost, "Path": "/api/v1/users", "Body": `{"Name":"mallory","Role":"admin"}`, "User": "admin", "Role": api.RoleAdmin}
	msg := e.do(api.RoleOperator, http.MethodPost, "/api/v1/racks/"+rack+"/operations",
		api.PendingOperation{Target: rack, Kind: api.OperationWrite, Payload: forged}).apiError(t, http.StatusUnprocessableEntity)
	if !strings.Contains(msg, "queued by making the write itself") {
		t.Errorf("refusal %q does not say how writes are queued", msg)
	}
	release := api.OperationsRelease{Origin: "region-x", Operations: []api.PendingOperation{
		{ID: 1, Target: rack, Kind: api.OperationWrite, Payload: forged, QueuedBy: "admin", QueuedRole: api.RoleAdmin}}}
	for _, role := range []string{api.RoleOperator, api.RoleAdmin} {
		e.do(role, http.MethodPost, "/api/v1/racks/"+rack+"/operations/release", release).apiError(t, http.StatusForbidden)
	}
	if ops := e.rackOps(rack); len(ops) != 0 {
		t.Fatalf("refused operations were queued: %+v", ops)
	}

	// A write that names a caller in its body is stored as the one who sent it.
	op := queued(t, e.do(api.RoleOperator, http.MethodPatch, "/api/v1/machines/"+machine, map[string]any{"Description": "mine"}), rack)
	if op.QueuedBy != "operator-user" || op.QueuedRole != api.RoleOperator || op.Payload["User"] != nil || op.Payload["Role"] != nil {
		t.Errorf("queued write %+v, want it recorded as operator-user's, its payload naming no one", op)
	}
	e.mustDo(asMove, http.MethodPost, "/api/v1/racks/"+rack+"/unpause", nil, http.StatusOK)
	e.do(api.RoleAdmin, http.MethodGet, "/api/v1/users/mallory", nil).apiError(t, http.StatusNotFound)
	if got := e.outcomeOf(rack, op.ID); got.Outcome != api.OutcomeApplied || got.QueuedBy != "operator-user" {
		t.Errorf("replayed write %+v", got)
	}
}

// A write is replayed only while the user who queued it exists and its role, as it is at
// the replay, permits the write.
func TestReplayRechecksTheCaller(t *testing.T) {
	e := newEnv(t)
	rack, machine, _, _ := e.pausedRack()
	gone, demoted := e.userToken("gone-user", api.RoleOperator), e.userToken("demoted-user", api.RoleOperator)
	path := "/api/v1/machines/" + machine
	first := queued(t, doRequest(t, gone, http.MethodPatch, e.base+path, map[string]any{"Description": "by a deleted user"}), rack)
	second := queued(t, doRequest(t, demoted, http.MethodPatch, e.base+path, map[string]any{"Name": "by-a-demoted-user"}), rack)
	e.mustDo(api.RoleAdmin, http.MethodDelete, "/api/v1/users/gone-user", nil, http.StatusNoContent)
	e.mustDo(api.RoleAdmin, http.MethodPatch, "/api/v1/users/demoted-user", map[string]any{"Role": api.RoleReadonly}, http.StatusOK)

	e.mustDo(asMove, http.MethodPost, "/api/v1/racks/"+rack+"/unpause", nil, http.StatusOK)
	m := e.mustDo(api.RoleReadonly, http.MethodGet, path, nil, http.StatusOK).json(t)
	if m["Description"] != "" || m["Name"] != "node-1" {
		t.Errorf("machine after the replay: %v; want neither write applied", m)
	}
	if got := e.outcomeOf(rack, first.ID); got.Done == nil || !strings.HasPrefix(got.Outcome, "401 ") || !strings.Contains(got.Outcome, "gone-user") {
		t.Errorf("write of the deleted user settled as %+v, want a 401 naming the user", got)
	}
	if got := e.outcomeOf(rack, second.ID); got.Done == nil || !strings.HasPrefix(got.Outcome, "403 ") || !strings.Contains(got.Outcome, api.RoleReadonly) {
		t.Errorf("write of the demoted user settled as %+v, want a 403 naming the role", got)
	}
}

// What ties a write to a rack is read from the object as the handler decodes it, so keys
// that differ only in case (encoding/json matches field names without case) are queued too.
func TestCaseVariantKeysAreQueued(t *testing.T) {
	e := newEnv(t)
	rack, machine, subnet, _ := e.pausedRack()
	elsewhere := e.create(api.KindMachines, map[string]any{"Name": "node-b"})["Uuid"].(string)
	vlan := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/subnets/"+subnet, nil, http.StatusOK).json(t)["VLAN"].(string)
	for _, w := range []struct {
		method, path string
		body         map[string]any
	}{
		{http.MethodPost, "/api/v1/machines", map[string]any{"Name": "node-lower", "rack": rack}},
		{http.MethodPost, "/api/v1/machines", map[string]any{"Name": "node-upper", "RACK": rack}},
		{http.MethodPatch, "/api/v1/machines/" + elsewhere, map[string]any{"rack": rack}},
		{http.MethodPut, "/api/v1/machines/" + elsewhere, map[string]any{"Name": "node-b", "rAcK": rack}},
		{http.MethodPost, "/api/v1/jobs", map[string]any{"machine": machine}},
		{http.MethodPost, "/api/v1/subnets", map[string]any{"Name": "net-b", "CIDR": "10.43.0.0/24", "vlan": vlan}},
	} {
		queued(t, e.do(api.RoleOperator, w.method, w.path, w.body), rack)
	}
	e.do(api.RoleReadonly, http.MethodGet, "/api/v1/machines/Name:node-lower", nil).apiError(t, http.StatusNotFound)
	if m := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/machines/"+elsewhere, nil, http.StatusOK).json(t); m["Rack"] != nil && m["Rack"] != "" {
		t.Errorf("machine moved onto the paused rack at once: %v", m)
	}
}

// A pause a transfer holds is ended, changed or handed over by that transfer only (its
// marked admin calls), whatever the caller's role; a pause no transfer holds is anyone's
// with the role.
func TestOnlyTheMoveEndsItsHold(t *testing.T) {
	e := newEnv(t)
	rack, _, _, _ := e.pausedRack()
	hold := api.RackHold{Transfer: "transfer-rack-a", Run: "run-1", Role: api.TransferSource, From: "region-a", To: "region-b"}
	base := "/api/v1/racks/" + rack
	for _, role := range []string{api.RoleOperator, api.RoleAdmin} {
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{http.MethodPost, base + "/unpause", nil},
			{http.MethodPost, base + "/pause", api.RackHold{Transfer: "transfer-rack-a", Run: "run-2", From: "region-a", To: "region-c"}},
			{http.MethodPost, base + "/recover", api.RackRecovery{Hold: hold, Action: api.RecoverUnpause, Outcome: api.RecoveryUndone, RecoveredBy: "me"}},
			{http.MethodPost, base + "/hand-over", nil},
			{http.MethodDelete, base + "/import", nil},
		} {
			msg := e.do(role, c.method, c.path, c.body).apiError(t, http.StatusForbidden)
			if !strings.Contains(msg, "transfer") {
				t.Errorf("%s %s %s: refusal %q does not name the transfer", role, c.method, c.path, msg)
			}
		}
	}
	r := e.mustDo(api.RoleReadonly, http.MethodGet, base, nil, http.StatusOK)
	if got := into[api.Rack](t, r); got.Status != api.RackPaused || api.RackHoldOf(got) != hold {
		t.Fatalf("rack after the refused calls: %+v, want it paused with its hold", got)
	}
	if got := into[api.Rack](t, e.mustDo(asMove, http.MethodPost, base+"/unpause", nil, http.StatusOK)); got.Status == api.RackPaused || !api.RackHoldOf(got).IsZero() {
		t.Errorf("rack after the move's unpause: %+v", got)
	}
	e.mustDo(api.RoleOperator, http.MethodPost, base+"/pause", nil, http.StatusOK)
	e.mustDo(api.RoleOperator, http.MethodPost, base+"/unpause", nil, http.StatusOK)
}

// The explicit queue takes no more than a queued write's body; a release carries no more
// than one rack's queue; released writes not replayed yet count toward the caps.
func TestQueueLimitsHoldForEveryRoute(t *testing.T) {
	e := newEnv(t)
	rack, machine, _, _ := e.pausedRack()
	big := api.PendingOperation{Target: rack, Kind: "power-on", Payload: map[string]any{"Pad": strings.Repeat("x", 900<<10)}}
	e.do(api.RoleOperator, http.MethodPost, "/api/v1/racks/"+rack+"/operations", big).apiError(t, http.StatusRequestEntityTooLarge)
	var many api.OperationsRelease
	many.Origin = "region-x"
	for i := range api.MaxQueuedOperations + 1 {
		many.Operations = append(many.Operations, api.PendingOperation{ID: int64(i), Target: rack, Kind: "power-on"})
	}
	e.do(asMove, http.MethodPost, "/api/v1/racks/"+rack+"/operations/release", many).apiError(t, http.StatusRequestEntityTooLarge)
	huge := api.OperationsRelease{Origin: "region-x", Operations: many.Operations[:100]}
	for i := range huge.Operations {
		huge.Operations[i].Payload = map[string]any{"Body": strings.Repeat("y", api.MaxQueuedWriteBody)}
	}
	e.do(asMove, http.MethodPost, "/api/v1/racks/"+rack+"/operations/release", huge).apiError(t, http.StatusRequestEntityTooLarge)
	if ops := e.rackOps(rack); len(ops) != 0 {
		t.Fatalf("refused operations were stored: %d", len(ops))
	}

	// Handed over and released, not replayed yet (the rack is still paused): they count.
	ctx := store.AsMove(context.Background())
	handed := api.OperationsRelease{Origin: "region-x", Operations: many.Operations[:api.MaxQueuedOperations-1]}
	for i := range handed.Operations {
		handed.Operations[i].Kind, handed.Operations[i].Payload = api.OperationWrite, map[string]any{"Method": http.MethodPatch, "Path": "/api/v1/machines/" + machine, "Body": `{}`}
	}
	if _, err := e.st.ReleaseRackOperations(ctx, store.Principal{User: "worker", Role: api.RoleAdmin}, rack, handed); err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/machines/" + machine
	queued(t, e.do(api.RoleOperator, http.MethodPatch, path, map[string]any{"Description": "last"}), rack)
	e.do(api.RoleOperator, http.MethodPatch, path, map[string]any{"Description": "one too many"}).apiError(t, http.StatusTooManyRequests)
}

// A rack's queue holds at most api.MaxQueuedBytes of payload, however few its writes.
func TestQueuedBytesAreBounded(t *testing.T) {
	e := newEnv(t)
	rack, machine, _, _ := e.pausedRack()
	path := "/api/v1/machines/" + machine
	description := strings.Repeat("z", api.MaxQueuedWriteBody-100)
	n := 0
	for ; n <= api.MaxQueuedBytes/len(description); n++ {
		r := e.do(api.RoleOperator, http.MethodPatch, path, map[string]any{"Description": description})
		if r.code == http.StatusTooManyRequests {
			if msg := r.apiError(t, r.code); !strings.Contains(msg, "bytes of queued operations") {
				t.Errorf("429 message %q", msg)
			}
			break
		}
		queued(t, r, rack)
	}
	if n == 0 || n > api.MaxQueuedBytes/len(description) {
		t.Errorf("%d writes of %d bytes queued, want as many as %d bytes hold", n, len(description), api.MaxQueuedBytes)
	}
}

// A replay cut short (the write claimed, the region gone before it settled) is run again by
// the next end of the pause, and applied once.
func TestReplayCutShortRunsAgain(t *testing.T) {
	e := newEnv(t)
	rack, machine, _, _ := e.pausedRack()
	op := queued(t, e.do(api.RoleOperator, http.MethodPost, "/api/v1/jobs", map[string]any{"Machine": machine}), rack)
	// What a region that crashed mid-replay leaves: the write claimed, nothing stored.
	if claimed, err := e.st.ClaimWrite(context.Background(), op.ID); err != nil || !claimed {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	e.mustDo(asMove, http.MethodPost, "/api/v1/racks/"+rack+"/unpause", nil, http.StatusOK)
	e.mustDo(asMove, http.MethodPost, "/api/v1/racks/"+rack+"/unpause", nil, http.StatusOK)
	if jobs := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/jobs?Machine="+machine, nil, http.StatusOK).list(t); len(jobs) != 1 {
		t.Errorf("jobs after the replays: %d, want the queued job once", len(jobs))
	}
	if got := e.outcomeOf(rack, op.ID); got.Outcome != api.OutcomeApplied || got.Done == nil {
		t.Errorf("write after the replay: %+v", got)
	}
}

// A queued PUT or PATCH is refused, and kept with its outcome, when a field it sets changed
// after it was queued; the writes queued after it for the same object, and those setting
// other fields, still apply.
func TestReplayRefusesToOverwriteANewerChange(t *testing.T) {
	e := newEnv(t)
	rack, machine, _, _ := e.pausedRack()
	path := "/api/v1/machines/" + machine
	stale := queued(t, e.do(api.RoleOperator, http.MethodPatch, path, map[string]any{"Description": "queued"}), rack)
	other := queued(t, e.do(api.RoleOperator, http.MethodPatch, path, map[string]any{"OS": "queued-os"}), rack)
	put := queued(t, e.do(api.RoleOperator, http.MethodPut, path, map[string]any{"Name": "node-1", "Rack": rack, "HardwareAddrs": []string{"52:54:00:42:00:01"}, "Description": "put"}), rack)
	// The move changes the machine meanwhile (its writes are not queued).
	e.mustDo(asMove, http.MethodPatch, path, map[string]any{"Description": "newer"}, http.StatusOK)

	e.mustDo(asMove, http.MethodPost, "/api/v1/racks/"+rack+"/unpause", nil, http.StatusOK)
	m := e.mustDo(api.RoleReadonly, http.MethodGet, path, nil, http.StatusOK).json(t)
	if m["Description"] != "newer" {
		t.Errorf("Description %v after the replay, want the newer change kept", m["Description"])
	}
	for _, op := range []api.PendingOperation{stale, put} {
		if got := e.outcomeOf(rack, op.ID); got.Done == nil || !strings.HasPrefix(got.Outcome, "409 ") || !strings.Contains(got.Outcome, "Description") {
			t.Errorf("write %d settled as %q, want a 409 naming the changed field", op.ID, got.Outcome)
		}
	}
	if got := e.outcomeOf(rack, other.ID); got.Outcome != api.OutcomeApplied {
		t.Errorf("write of another field settled as %q, want it applied", got.Outcome)
	}
}

// A region process that starts replays the writes a replay cut short left after their rack's
// pause ended, with no other end of the pause to come.
func TestStartReplaysWritesLeftByACutShortReplay(t *testing.T) {
	e := newEnv(t)
	rack, machine, _, _ := e.pausedRack()
	op := queued(t, e.do(api.RoleOperator, http.MethodPost, "/api/v1/jobs", map[string]any{"Machine": machine}), rack)
	// What a region that stopped mid-replay leaves: the pause ended, the write claimed only.
	ctx := context.Background()
	if _, err := e.st.UnpauseRack(store.AsMove(ctx), store.Principal{User: "worker", Role: api.RoleAdmin}, rack); err != nil {
		t.Fatal(err)
	}
	if claimed, err := e.st.ClaimWrite(ctx, op.ID); err != nil || !claimed {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	startServer(t, e.st, "region-restarted")
	eventually(t, "the left write replayed by the process that started", func() bool {
		got, err := e.st.RackOperation(ctx, rack, op.ID)
		return err == nil && got.Outcome == api.OutcomeApplied
	})
	if jobs := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/jobs?Machine="+machine, nil, http.StatusOK).list(t); len(jobs) != 1 {
		t.Errorf("jobs after the replay: %d, want the queued job once", len(jobs))
	}
}
