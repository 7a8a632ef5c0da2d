package workflows_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/rack/pods"
	"github.com/ironflow/ironflow/workflows"
)

const (
	podUUID     = "0d000000-0000-4000-8000-000000000001"
	podRackUUID = "0a000000-0000-4000-8000-000000000001"
)

// podActs stands in for the rack's pod activities (same names, on the rack's queue): a
// hypervisor and a region in memory, a journal of the calls, and the failures a test asks for.
type podActs struct {
	mu       sync.Mutex
	calls    []string
	vms      map[string]string // UUID -> name, on the hypervisor
	machines map[string]bool   // declared on the region
	fail     map[string]error  // activity name -> its error
	block    chan struct{}     // closed when a blocking DeclareVM starts; it then waits for its cancel
}

func newPodActs() *podActs {
	return &podActs{vms: map[string]string{}, machines: map[string]bool{}, fail: map[string]error{}}
}

func (p *podActs) enter(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, name)
	return p.fail[name]
}

func (p *podActs) journal() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

func (p *podActs) VerifyPodGrant(_ context.Context, in rackacts.PodGrantInput) (rackacts.PodGrantResult, error) {
	return rackacts.PodGrantResult{GrantedTo: "alice"}, p.enter("VerifyPodGrant")
}

func (p *podActs) ComposeVM(_ context.Context, in rackacts.ComposeVMInput) (pods.Composed, error) {
	if err := p.enter("ComposeVM"); err != nil {
		return pods.Composed{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.vms[in.VM.UUID] = in.VM.Name
	return pods.Composed{Name: in.VM.Name, UUID: in.VM.UUID, MAC: "52:54:00:00:00:01"}, nil
}

func (p *podActs) DeclareVM(ctx context.Context, in rackacts.DeclareVMInput) (rackacts.DeclareVMResult, error) {
	if err := p.enter("DeclareVM"); err != nil {
		return rackacts.DeclareVMResult{}, err
	}
	if p.block != nil {
		close(p.block)
		<-ctx.Done()
		return rackacts.DeclareVMResult{}, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.machines[in.Composed.UUID] = true
	return rackacts.DeclareVMResult{Machine: in.Composed.UUID, Name: in.Composed.Name}, nil
}

func (p *podActs) DecomposeVM(_ context.Context, in rackacts.VMInput) error {
	if err := p.enter("DecomposeVM"); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.vms, in.VM)
	return nil
}

func (p *podActs) ForgetVM(_ context.Context, in rackacts.VMInput) error {
	if err := p.enter("ForgetVM"); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.machines, in.VM)
	return nil
}

func (p *podActs) RefreshPod(context.Context, rackacts.PodInput) (rackacts.PodRefreshResult, error) {
	return rackacts.PodRefreshResult{Arch: "x86_64", StoragePools: 1}, p.enter("RefreshPod")
}

func (p *podActs) PowerVM(_ context.Context, in rackacts.PowerVMInput) (rackacts.PowerVMResult, error) {
	return rackacts.PowerVMResult{State: pods.PowerOff}, p.enter("PowerVM")
}

func podTarget() workflows.PodTarget {
	return workflows.PodTarget{Pod: podUUID, Rack: podRackUUID, Grant: "grant"}
}

func composeInput() workflows.PodComposeInput {
	return workflows.PodComposeInput{PodTarget: podTarget(), VM: pods.VM{Name: "vm-1", Cores: 1, MemoryBytes: 1 << 30,
		Disks: []pods.Disk{{Pool: "default", SizeBytes: 1 << 30}}, NIC: pods.NIC{Bridge: "br0"}}}
}

func podEnv(acts *podActs) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	for _, wf := range []any{workflows.PodCompose, workflows.PodDecompose, workflows.PodRefresh, workflows.PodPower} {
		env.RegisterWorkflow(wf)
	}
	env.RegisterActivity(acts)
	return env
}

func TestPodComposeDeclaresTheVMItComposed(t *testing.T) {
	acts := newPodActs()
	env := podEnv(acts)
	env.ExecuteWorkflow(workflows.PodCompose, composeInput())
	var res workflows.PodComposeResult
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	equal(t, "activities", acts.journal(), []string{"VerifyPodGrant", "ComposeVM", "DeclareVM"})
	if res.Name != "vm-1" || acts.vms[res.Machine] != "vm-1" || !acts.machines[res.Machine] || res.MAC == "" {
		t.Errorf("result %+v, VMs %v, machines %v", res, acts.vms, acts.machines)
	}
}

// A compose whose declaration the region refuses is undone: the VM is decomposed (by its
// UUID) and its machine forgotten, so neither the pod nor the region keeps anything.
func TestPodComposeUndoesWhenTheDeclarationFails(t *testing.T) {
	acts := newPodActs()
	acts.fail["DeclareVM"] = temporal.NewNonRetryableApplicationError("machine Name vm-1 already exists", rackacts.ErrTypeRegionRefused, nil)
	env := podEnv(acts)
	env.ExecuteWorkflow(workflows.PodCompose, composeInput())
	err := env.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("workflow error %v, want the region's refusal", err)
	}
	equal(t, "activities", acts.journal(), []string{"VerifyPodGrant", "ComposeVM", "DeclareVM", "DecomposeVM", "ForgetVM"})
	if len(acts.vms) != 0 || len(acts.machines) != 0 {
		t.Errorf("left behind: VMs %v, machines %v", acts.vms, acts.machines)
	}
}

// A compose cancelled while it declares the machine waits for that step to stop, then undoes
// the compose on a disconnected context.
func TestPodComposeCancelledIsUndone(t *testing.T) {
	acts := newPodActs()
	acts.block = make(chan struct{})
	env := podEnv(acts)
	env.SetTestTimeout(30 * time.Second)
	env.RegisterDelayedCallback(func() {
		<-acts.block
		env.CancelWorkflow()
	}, time.Second)
	env.ExecuteWorkflow(workflows.PodCompose, composeInput())
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("workflow error %v, want cancelled", err)
	}
	equal(t, "activities", acts.journal(), []string{"VerifyPodGrant", "ComposeVM", "DeclareVM", "DecomposeVM", "ForgetVM"})
	if len(acts.vms) != 0 {
		t.Errorf("VMs left after a cancelled compose: %v", acts.vms)
	}
}

// A name another VM has on the pod is refused, and that VM is left alone: no undo touches it.
func TestPodComposeNameClashUndoesNothing(t *testing.T) {
	acts := newPodActs()
	acts.vms["5e000000-0000-4000-8000-00000000000f"] = "vm-1"
	acts.fail["ComposeVM"] = temporal.NewNonRetryableApplicationError("pod kvm-01 already has a VM named vm-1", rackacts.ErrTypeNameClash, nil)
	env := podEnv(acts)
	env.ExecuteWorkflow(workflows.PodCompose, composeInput())
	if err := env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "already has a VM named vm-1") {
		t.Fatalf("workflow error %v", err)
	}
	equal(t, "activities", acts.journal(), []string{"VerifyPodGrant", "ComposeVM"})
	if len(acts.vms) != 1 {
		t.Errorf("the other VM: %v", acts.vms)
	}
}

// A grant the region refuses (a readonly caller's, or none) stops every pod workflow before it
// touches the pod.
func TestPodWorkflowsStopAtARefusedGrant(t *testing.T) {
	vm := workflows.PodVMInput{PodTarget: podTarget(), Machine: "5e000000-0000-4000-8000-000000000001"}
	for name, run := range map[string]struct {
		wf any
		in any
	}{
		"compose":   {workflows.PodCompose, composeInput()},
		"decompose": {workflows.PodDecompose, vm},
		"refresh":   {workflows.PodRefresh, podTarget()},
		"power":     {workflows.PodPower, workflows.PodPowerInput{PodVMInput: vm, Action: pods.PowerOn}},
	} {
		acts := newPodActs()
		acts.fail["VerifyPodGrant"] = temporal.NewNonRetryableApplicationError("the region refused the grant", rackacts.ErrTypeGrantRefused, nil)
		env := podEnv(acts)
		env.ExecuteWorkflow(run.wf, run.in)
		if err := env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "refused the grant") {
			t.Errorf("%s: %v", name, err)
		}
		equal(t, name, acts.journal(), []string{"VerifyPodGrant"})
	}
}
