package rack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities/heartbeat"
	"github.com/ironflow/ironflow/rack/pods"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// The pod activities (ARCHITECTURE.md "Pods"): the rack drives the KVM pods it hosts, on its own
// network, and writes what that changes to its region through its own link (region/api/rack.go),
// so they follow the rack when it moves to another region. Inputs name pods and VMs; the rack's
// SSH key never leaves the rack and the discovered facts go straight to the region.

// Application error types of the pod activities; recorded in histories, never to change.
const (
	ErrTypePodRefused    = "PodRefused"    // the request or the pod makes it impossible (pods.ErrRefused)
	ErrTypeNameClash     = "VMNameClash"   // another domain has the VM's name
	ErrTypeWrongRack     = "WrongRack"     // the pod is not this rack's
	ErrTypeGrantRefused  = "GrantRefused"  // the region refused the caller's grant
	ErrTypeNoVM          = "NoVM"          // the pod has no such VM
	ErrTypeRegionRefused = "RegionRefused" // the region refused a write (4xx)
	ErrTypeNoDaemon      = "NoLibvirtd"    // no libvirtd listens at the pod's local socket (a refresh only)
)

// PodRegion is what the pod activities need of the rack's region, through the rack's link and
// with the rack's token (implemented by package rack).
type PodRegion interface {
	Pod(ctx context.Context, key string) (api.Pod, error)
	// RackPods lists the pods the rack hosts.
	RackPods(ctx context.Context) ([]api.Pod, error)
	StorePodFacts(ctx context.Context, pod string, f api.PodFacts) (api.Pod, error)
	DeclarePodVM(ctx context.Context, pod string, m api.Machine) (api.Machine, error)
	ForgetPodVM(ctx context.Context, pod, machine string) error
	VerifyGrant(ctx context.Context, check api.GrantCheck) (api.GrantClaims, error)
}

// PodDialer connects to a pod's libvirt daemon (pods.Dialer).
type PodDialer interface {
	Dial(pod api.Pod) (*pods.Conn, error)
}

// Pods is how the rack reaches the pods it hosts: its region (for their records and its
// writes) and the hypervisors. The zero Pods drives no pods.
type Pods struct {
	Region PodRegion
	Dialer PodDialer
}

// PodGrantInput names a pod and carries the caller's grant for it (region/api/grants.go).
type PodGrantInput struct {
	Pod   string `json:"Pod"` // pod UUID
	Grant string `json:"Grant"`
}

// PodGrantResult is who the region issued the grant to.
type PodGrantResult struct {
	GrantedTo string `json:"GrantedTo"`
}

// VerifyPodGrant has the rack's region check that the grant covers work on the pod, and
// audit it with the workflow that asks. A refusal is final.
func (a *Activities) VerifyPodGrant(ctx context.Context, in PodGrantInput) (PodGrantResult, error) {
	if _, err := a.rackPod(ctx, in.Pod); err != nil {
		return PodGrantResult{}, err
	}
	claims, err := a.pods.Region.VerifyGrant(ctx, api.GrantCheck{Grant: in.Grant, Kind: api.GrantPod, Key: in.Pod, Migration: workflowID(ctx)})
	if statusIn(err, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity) {
		return PodGrantResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the region refused the grant for pod %s: %v (ask it for one as an operator or admin)", in.Pod, err), ErrTypeGrantRefused, nil)
	}
	if err != nil {
		return PodGrantResult{}, fmt.Errorf("verify the grant for pod %s: %w", in.Pod, err)
	}
	return PodGrantResult{GrantedTo: claims.GrantedTo}, nil
}

// PodInput names a pod by UUID.
type PodInput struct {
	Pod string `json:"Pod"`
}

// PodRefreshResult summarises a refresh; the facts themselves are on the region.
type PodRefreshResult struct {
	Arch           string `json:"Arch"`
	StoragePools   int    `json:"StoragePools"`
	AvailableBytes uint64 `json:"AvailableBytes"`
}

// RefreshPod reads the pod's facts from its hypervisor and stores them on the region in one
// write. An unreachable hypervisor leaves the stored facts as they were.
func (a *Activities) RefreshPod(ctx context.Context, in PodInput) (PodRefreshResult, error) {
	pod, err := a.rackPod(ctx, in.Pod)
	if err != nil {
		return PodRefreshResult{}, err
	}
	res, err := a.refresh(ctx, pod)
	// A refresh changes nothing, so it need not wait for a daemon nobody started: the
	// operator hears at once. Work that may have to undo a step keeps retrying instead (a
	// restarting libvirtd removes its socket for a moment).
	if errors.Is(err, errNoDaemon) {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeNoDaemon, nil)
	}
	return res, err
}

// RefreshPods refreshes every pod the rack hosts with a's pods (the rack's schedule, outside
// Temporal: a function, not an activity); it returns the errors of the pods it could not
// refresh, each naming its pod.
func RefreshPods(ctx context.Context, a *Activities) error {
	if a.pods.Region == nil {
		return nil
	}
	all, err := a.pods.Region.RackPods(ctx)
	if err != nil {
		return fmt.Errorf("list the rack's pods: %w", err)
	}
	var errs []error
	for _, pod := range all {
		if _, err := a.refresh(ctx, pod); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (a *Activities) refresh(ctx context.Context, pod api.Pod) (PodRefreshResult, error) {
	var facts pods.Facts
	err := a.withConn(ctx, pod, func(c *pods.Conn) error {
		var err error
		facts, err = c.Discover()
		return err
	})
	if err != nil {
		return PodRefreshResult{}, err
	}
	stored, err := a.pods.Region.StorePodFacts(ctx, pod.Uuid, facts.Region())
	if err != nil {
		return PodRefreshResult{}, fmt.Errorf("pod %s: store its facts: %w", pod.Name, err)
	}
	_, _, free := stored.StorageUsage()
	return PodRefreshResult{Arch: stored.Arch, StoragePools: len(stored.StoragePools), AvailableBytes: free}, nil
}

// ComposeVMInput asks for a VM on a pod. VM.Name and VM.UUID are fixed by the workflow, so a
// retry finds the VM an earlier attempt defined.
type ComposeVMInput struct {
	Pod string    `json:"Pod"`
	VM  api.PodVM `json:"VM"`
}

// ComposeVM composes the VM on the pod (volumes, then the domain, not started). It is keyed by
// the VM's name: a domain of that name with the VM's UUID is this compose's, found again on a
// retry; with another UUID it is a name clash, refused.
func (a *Activities) ComposeVM(ctx context.Context, in ComposeVMInput) (api.ComposedVM, error) {
	if in.VM.UUID == "" {
		return api.ComposedVM{}, temporal.NewNonRetryableApplicationError("compose: the VM needs its UUID", ErrTypeInvalidInput, nil)
	}
	pod, err := a.rackPod(ctx, in.Pod)
	if err != nil {
		return api.ComposedVM{}, err
	}
	var out api.ComposedVM
	err = a.withConn(ctx, pod, func(c *pods.Conn) error {
		found, err := c.Existing(in.VM.Name)
		incomplete := errors.Is(err, pods.ErrIncompleteVM)
		switch {
		case err == nil && found.UUID == in.VM.UUID:
			out = found
			return nil
		case incomplete && found.UUID == in.VM.UUID:
			// An earlier attempt stopped half-way (the rack died): its domain names what it made.
			if err := c.Decompose(found.UUID); err != nil {
				return fmt.Errorf("remove the half-composed VM %s before composing it again: %w", in.VM.Name, err)
			}
		case err == nil || incomplete:
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("pod %s already has a VM named %s (UUID %s): choose another name", pod.Name, in.VM.Name, found.UUID), ErrTypeNameClash, nil)
		case !errors.Is(err, pods.ErrNoVM):
			return err
		}
		out, err = c.Compose(in.VM)
		return err
	})
	return out, err
}

// DeclareVMInput is a composed VM to declare as a machine of the pod.
type DeclareVMInput struct {
	Pod      string         `json:"Pod"`
	Composed api.ComposedVM `json:"Composed"`
}

// DeclareVMResult names the declared machine.
type DeclareVMResult struct {
	Machine string `json:"Machine"` // UUID: the VM's
	Name    string `json:"Name"`
}

// DeclareVM declares the VM as a machine on the region before it ever boots, with its MAC and
// its UUID (which its firmware reports as the SMBIOS UUID), so it enlists onto this machine; the
// region adds it to the pod's VMs in the same write. A retry answers the machine declared.
func (a *Activities) DeclareVM(ctx context.Context, in DeclareVMInput) (DeclareVMResult, error) {
	pod, err := a.rackPod(ctx, in.Pod)
	if err != nil {
		return DeclareVMResult{}, err
	}
	vm := in.Composed
	m, err := a.pods.Region.DeclarePodVM(ctx, pod.Uuid, api.Machine{
		Uuid:          vm.UUID,
		Name:          vm.Name,
		HardwareAddrs: []string{vm.MAC},
		Fingerprint:   api.Fingerprint{SystemUUID: vm.UUID},
		Status:        api.StatusNew,
	})
	if err != nil {
		return DeclareVMResult{}, regionError(err, "pod %s: declare machine %s", pod.Name, vm.Name)
	}
	return DeclareVMResult{Machine: m.Uuid, Name: m.Name}, nil
}

// VMInput names a VM of a pod by its UUID (the machine's).
type VMInput struct {
	Pod string `json:"Pod"`
	VM  string `json:"VM"`
}

// DecomposeVM removes a VM of the pod's VMs from its pod: stopped, its volumes deleted, its
// domain undefined. A VM whose domain is already gone is not an error, so a retry finishes.
func (a *Activities) DecomposeVM(ctx context.Context, in VMInput) error {
	pod, err := a.podVM(ctx, in.Pod, in.VM)
	if err != nil {
		return err
	}
	return a.withConn(ctx, pod, func(c *pods.Conn) error {
		if err := c.Decompose(in.VM); err != nil && !errors.Is(err, pods.ErrNoVM) {
			return err
		}
		return nil
	})
}

// UndoComposeVM removes what a compose of in.VM made, declared or not yet: the domain named
// in.VM.Name, only when its UUID is in.VM.UUID (which the compose's workflow chose itself, so
// no other domain has it), with its volumes. A domain of that name with another UUID is
// another VM, left alone; none at all is no error.
func (a *Activities) UndoComposeVM(ctx context.Context, in ComposeVMInput) error {
	if in.VM.Name == "" || in.VM.UUID == "" {
		return temporal.NewNonRetryableApplicationError("undo of a compose: the VM needs its Name and UUID", ErrTypeInvalidInput, nil)
	}
	pod, err := a.rackPod(ctx, in.Pod)
	if err != nil {
		return err
	}
	return a.withConn(ctx, pod, func(c *pods.Conn) error {
		found, err := c.Existing(in.VM.Name)
		switch {
		case errors.Is(err, pods.ErrNoVM):
			return nil
		case err != nil && !errors.Is(err, pods.ErrIncompleteVM):
			return err
		case found.UUID != in.VM.UUID:
			return nil
		}
		if err := c.Decompose(found.UUID); err != nil && !errors.Is(err, pods.ErrNoVM) {
			return err
		}
		return nil
	})
}

// ForgetVM deletes the VM's machine on the region and removes it from the pod's VMs, in one
// write; a machine already gone is not an error.
func (a *Activities) ForgetVM(ctx context.Context, in VMInput) error {
	pod, err := a.rackPod(ctx, in.Pod)
	if err != nil {
		return err
	}
	if err := a.pods.Region.ForgetPodVM(ctx, pod.Uuid, in.VM); err != nil {
		return regionError(err, "pod %s: forget machine %s", pod.Name, in.VM)
	}
	return nil
}

// PowerVMInput is a power action on a VM of a pod.
type PowerVMInput struct {
	Pod    string          `json:"Pod"`
	VM     string          `json:"VM"`
	Action api.PowerAction `json:"Action"`
}

// PowerVMResult is the VM's power state after the action: "on" or "off".
type PowerVMResult struct {
	State api.PowerAction `json:"State"`
}

// PowerVM applies the action (idempotent: on for a running VM changes nothing) and reports the
// VM's power state. A VM not in the pod's VMs is refused.
func (a *Activities) PowerVM(ctx context.Context, in PowerVMInput) (PowerVMResult, error) {
	if _, err := api.ParsePowerAction(string(in.Action)); err != nil {
		return PowerVMResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidInput, nil)
	}
	pod, err := a.podVM(ctx, in.Pod, in.VM)
	if err != nil {
		return PowerVMResult{}, err
	}
	var out PowerVMResult
	err = a.withConn(ctx, pod, func(c *pods.Conn) error {
		if err := c.Power(in.VM, in.Action); err != nil {
			return err
		}
		var err error
		out.State, err = c.PowerState(in.VM)
		return err
	})
	return out, err
}

// rackPod reads the pod from the region and refuses one this rack does not host.
func (a *Activities) rackPod(ctx context.Context, key string) (api.Pod, error) {
	if a.pods.Region == nil {
		return api.Pod{}, temporal.NewNonRetryableApplicationError("this rack's worker drives no pods", ErrTypeWrongRack, nil)
	}
	pod, err := a.pods.Region.Pod(ctx, key)
	if err != nil {
		return api.Pod{}, regionError(err, "pod %s", key)
	}
	if pod.Uuid != key {
		// One name per pod, so that a workflow ID per pod (workflows/ids.go) is one per pod.
		return api.Pod{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("name pod %s by its UUID %s, not %q", pod.Name, pod.Uuid, key), ErrTypeInvalidInput, nil)
	}
	if self := a.rack.State().Uuid; pod.Rack != self {
		return api.Pod{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("pod %s is hosted by rack %q, not by this rack %s", pod.Name, pod.Rack, self), ErrTypeWrongRack, nil)
	}
	return pod, nil
}

// podVM is rackPod for work on the VM vm (its UUID) of the pod: the rack acts only on the VMs
// in the pod's VMs, the ones Ironflow composed and declared there, never on another domain of
// the hypervisor nor on a VM of another pod, whatever the workflow's input names.
func (a *Activities) podVM(ctx context.Context, key, vm string) (api.Pod, error) {
	pod, err := a.rackPod(ctx, key)
	if err != nil {
		return api.Pod{}, err
	}
	if !slices.Contains(pod.VMs, vm) {
		return api.Pod{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("pod %s has no such VM %q among its VMs: the rack acts only on the VMs composed on it", pod.Name, vm), ErrTypeNoVM, nil)
	}
	return pod, nil
}

// withConn runs fn on a connection to pod, closed after it, heartbeating meanwhile (creating
// or deleting large volumes and refreshing pools take a while), and classifies its error.
func (a *Activities) withConn(ctx context.Context, pod api.Pod, fn func(*pods.Conn) error) error {
	return heartbeat.While(ctx, func(ctx context.Context) error {
		conn, err := a.pods.Dialer.Dial(pod)
		if err != nil {
			return podError(pod, noDaemonHint(pod, err))
		}
		defer conn.Close()
		if err := ctx.Err(); err != nil {
			return err
		}
		return podError(pod, fn(conn))
	})
}

// errNoDaemon marks a dial that found no libvirtd at a local socket.
var errNoDaemon = errors.New("is libvirtd running? Start it on the pod's host: systemctl start libvirtd (or libvirtd --daemon)")

// noDaemonHint adds errNoDaemon to the dial of a local pod (qemu:///system) that found no
// socket file or no listener on it.
func noDaemonHint(pod api.Pod, err error) error {
	if strings.HasPrefix(pod.PowerAddress, "qemu:///") && (errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)) {
		return fmt.Errorf("%w: %w", err, errNoDaemon)
	}
	return err
}

// podError makes what the pod refused final; anything else (libvirtd unreachable or
// restarting, a dropped SSH connection) is retried.
func podError(pod api.Pod, err error) error {
	var appErr *temporal.ApplicationError
	switch {
	case err == nil, errors.As(err, &appErr):
		return err
	case errors.Is(err, pods.ErrNoVM):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("pod %s: %v", pod.Name, err), ErrTypeNoVM, nil)
	case errors.Is(err, pods.ErrRefused):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("pod %s: %v", pod.Name, err), ErrTypePodRefused, nil)
	}
	return fmt.Errorf("pod %s: %w", pod.Name, err)
}

// regionError makes the region's refusals final; 5xx, 408, 429 and network errors are retried.
func regionError(err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if statusIn(err, http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusConflict, http.StatusUnprocessableEntity) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", msg, err), ErrTypeRegionRefused, nil)
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// statusIn reports whether err is a region answer with one of the codes.
func statusIn(err error, codes ...int) bool {
	apiErr, ok := errors.AsType[*client.APIError](err)
	return ok && slices.Contains(codes, apiErr.StatusCode)
}

// workflowID is the ID of the workflow running the activity, for the region's audit; "" outside one.
func workflowID(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return ""
	}
	return activity.GetInfo(ctx).WorkflowExecution.ID
}
