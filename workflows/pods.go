package workflows

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/region/api"
)

// Pod workflows (ARCHITECTURE.md "Pods"): short workflows on the ironflow task queue whose
// every activity runs inside the pod's rack, on rackacts.TaskQueue(rack): the rack reaches the
// hypervisor on its own network and writes to its region with its own token. Each first has
// the rack's region verify the caller's pod grant (operator or admin), so a readonly token
// changes nothing, and records who asked in the StartedBy memo.

// PodTarget names the pod a workflow works on and carries the caller's grant for it.
type PodTarget struct {
	Pod   string `json:"Pod"`  // pod UUID
	Rack  string `json:"Rack"` // the pod's rack UUID, whose worker runs the activities
	Grant string `json:"Grant"`
}

// PodComposeInput asks for a VM on a pod. VM.Name is required (it keys the compose); the
// workflow gives the VM its UUID, which is also its machine's.
type PodComposeInput struct {
	PodTarget
	VM api.PodVM `json:"VM"`
}

// PodComposeResult is the machine declared for the composed VM.
type PodComposeResult struct {
	Machine string `json:"Machine"` // UUID, the VM's
	Name    string `json:"Name"`
	MAC     string `json:"MAC"`
}

// PodVMInput names a VM of a pod by its machine's UUID (the domain's UUID).
type PodVMInput struct {
	PodTarget
	Machine string `json:"Machine"`
}

// PodPowerInput is a power action on a VM of a pod.
type PodPowerInput struct {
	PodVMInput
	Action api.PowerAction `json:"Action"`
}

// Activity options of the pod steps: the rack's worker must pick a step up within the
// schedule-to-close timeout; libvirt work heartbeats (activities/heartbeat), and a cancelled
// step is waited for, so an undo never runs beside the compose it undoes.
var (
	podCallOptions = workflow.ActivityOptions{
		StartToCloseTimeout:    5 * time.Minute,
		ScheduleToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:       30 * time.Second,
		WaitForCancellation:    true,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 5},
	}
	// podUndoOptions undo a compose: longer, so a rack or hypervisor back within the hour
	// still gets its VM removed.
	podUndoOptions = workflow.ActivityOptions{
		StartToCloseTimeout:    5 * time.Minute,
		ScheduleToCloseTimeout: time.Hour,
		HeartbeatTimeout:       30 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
	}
)

// composeOwnUUIDChange is the GetVersion change ID of PodCompose giving every VM its UUID
// itself (a caller's VM.UUID is refused) and undoing a compose by the VM's name and UUID: a
// UUID the caller chose could name a domain Ironflow did not compose, which the compose would
// then take for its own, declare, and undo. Runs recorded before it take the input's UUID.
const composeOwnUUIDChange = "compose-own-uuid"

// startPodWork checks that the run is the one workflow of its subject (ID, one of the
// Pod…ID), the grant on the rack's region, records who asked, and returns ctx bound to the
// rack's task queue.
func startPodWork(ctx workflow.Context, t PodTarget, what, id string) (workflow.Context, error) {
	if t.Pod == "" || t.Rack == "" {
		return ctx, temporal.NewNonRetryableApplicationError("a pod workflow needs the Pod and its Rack", rackacts.ErrTypeInvalidInput, nil)
	}
	if err := checkOwnID(ctx, what, id); err != nil {
		return ctx, err
	}
	rackCtx := workflow.WithTaskQueue(ctx, rackacts.TaskQueue(t.Rack))
	var who rackacts.PodGrantResult
	if err := call(rackCtx, podCallOptions, rackActs.VerifyPodGrant, rackacts.PodGrantInput{Pod: t.Pod, Grant: t.Grant}, &who); err != nil {
		return ctx, err
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{MemoStartedBy: who.GrantedTo}); err != nil {
		return ctx, err
	}
	return rackCtx, nil
}

// PodCompose composes a VM on the pod and declares it as a machine of the rack's region (with
// the VM's MAC and UUID, added to the pod's VMs in the same write), so the VM enlists onto it
// when it PXE-boots. When a step after the compose fails, or the run is cancelled, the VM is
// decomposed again on a disconnected context: nothing is left on the hypervisor.
func PodCompose(ctx workflow.Context, in PodComposeInput) (PodComposeResult, error) {
	if in.VM.Name == "" {
		return PodComposeResult{}, temporal.NewNonRetryableApplicationError("compose: the VM needs a Name", rackacts.ErrTypeInvalidInput, nil)
	}
	ownUUID := workflow.GetVersion(ctx, composeOwnUUIDChange, workflow.DefaultVersion, 1) >= 1
	if ownUUID && in.VM.UUID != "" {
		return PodComposeResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("compose of %s: leave VM.UUID empty; the workflow gives the VM its UUID (%q was given)", in.VM.Name, in.VM.UUID), rackacts.ErrTypeInvalidInput, nil)
	}
	rackCtx, err := startPodWork(ctx, in.PodTarget, "the compose of VM "+in.VM.Name+" on pod "+in.Pod, PodComposeID(in.Pod, in.VM.Name))
	if err != nil {
		return PodComposeResult{}, err
	}
	if in.VM.UUID == "" {
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return uuid.NewString() }).Get(&in.VM.UUID); err != nil {
			return PodComposeResult{}, err
		}
	}
	var composed api.ComposedVM
	err = call(rackCtx, podCallOptions, rackActs.ComposeVM, rackacts.ComposeVMInput{Pod: in.Pod, VM: in.VM}, &composed)
	var declared rackacts.DeclareVMResult
	if err == nil {
		err = call(rackCtx, podCallOptions, rackActs.DeclareVM, rackacts.DeclareVMInput{Pod: in.Pod, Composed: composed}, &declared)
	}
	if err != nil {
		return PodComposeResult{}, undoCompose(rackCtx, in, ownUUID, err)
	}
	return PodComposeResult{Machine: declared.Machine, Name: declared.Name, MAC: composed.MAC}, nil
}

// undoCompose removes what the compose may have made: the VM by its name and UUID (a VM of the
// same name that is not this one is left alone; none at all is no error) and its machine, if
// it was declared. It runs even when the run was cancelled. Runs recorded before the workflow
// chose every VM's UUID itself (ownUUID false) decompose the VM by its UUID alone.
func undoCompose(ctx workflow.Context, in PodComposeInput, ownUUID bool, cause error) error {
	if isRefusal(cause, rackacts.ErrTypeNameClash) {
		return cause // nothing of this compose exists
	}
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	vm := rackacts.VMInput{Pod: in.Pod, VM: in.VM.UUID}
	var undo error
	if ownUUID {
		// The VM may not be among the pod's VMs yet, where DecomposeVM acts only.
		undo = call(dctx, podUndoOptions, rackActs.UndoComposeVM, rackacts.ComposeVMInput{Pod: in.Pod, VM: in.VM}, nil)
	} else {
		undo = call(dctx, podUndoOptions, rackActs.DecomposeVM, vm, nil)
	}
	if undo == nil {
		undo = call(dctx, podUndoOptions, rackActs.ForgetVM, vm, nil)
	}
	if undo != nil {
		return fmt.Errorf("compose of %s failed and its undo too (VM %s may be left on the pod; run `ironflow pods decompose`): %w",
			in.VM.Name, in.VM.UUID, errors.Join(cause, undo))
	}
	return cause
}

// isRefusal reports whether err is an activity's non-retryable error of type errType.
func isRefusal(err error, errType string) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == errType
}

// PodDecompose removes a VM from its pod (its domain and volumes) and then its machine from
// the region (and from the pod's VMs). Both steps are idempotent, so running it again after a
// failure finishes the job.
func PodDecompose(ctx workflow.Context, in PodVMInput) error {
	rackCtx, err := startPodWork(ctx, in.PodTarget, "the decompose of machine "+in.Machine, PodDecomposeID(in.Machine))
	if err != nil {
		return err
	}
	vm := rackacts.VMInput{Pod: in.Pod, VM: in.Machine}
	if err := call(rackCtx, podCallOptions, rackActs.DecomposeVM, vm, nil); err != nil {
		return err
	}
	return call(rackCtx, podCallOptions, rackActs.ForgetVM, vm, nil)
}

// PodRefresh reads the pod's facts from its hypervisor and stores them on the region in one
// write; an unreachable hypervisor leaves the stored facts as they were.
func PodRefresh(ctx workflow.Context, in PodTarget) (rackacts.PodRefreshResult, error) {
	rackCtx, err := startPodWork(ctx, in, "the refresh of pod "+in.Pod, PodRefreshID(in.Pod))
	if err != nil {
		return rackacts.PodRefreshResult{}, err
	}
	var res rackacts.PodRefreshResult
	return res, call(rackCtx, podCallOptions, rackActs.RefreshPod, rackacts.PodInput{Pod: in.Pod}, &res)
}

// PodPower powers a VM of a pod on, off or through a cycle and returns its power state.
func PodPower(ctx workflow.Context, in PodPowerInput) (rackacts.PowerVMResult, error) {
	if _, err := api.ParsePowerAction(string(in.Action)); err != nil {
		return rackacts.PowerVMResult{}, temporal.NewNonRetryableApplicationError(err.Error(), rackacts.ErrTypeInvalidInput, nil)
	}
	rackCtx, err := startPodWork(ctx, in.PodTarget, "the power action on machine "+in.Machine, PodPowerID(in.Machine))
	if err != nil {
		return rackacts.PowerVMResult{}, err
	}
	var res rackacts.PowerVMResult
	return res, call(rackCtx, podCallOptions, rackActs.PowerVM, rackacts.PowerVMInput{Pod: in.Pod, VM: in.Machine, Action: in.Action}, &res)
}
