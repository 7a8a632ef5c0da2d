package workflows_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/activities"
	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/region/api"
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

// VerifyPowerGrant and PowerMachine fake the rack's machine power activities.
func (p *podActs) VerifyPowerGrant(_ context.Context, in rackacts.PowerGrantInput) (rackacts.PodGrantResult, error) {
	return rackacts.PodGrantResult{GrantedTo: "alice"}, p.enter("VerifyPowerGrant")
}

func (p *podActs) PowerMachine(_ context.Context, in rackacts.PowerMachineInput) (rackacts.PowerMachineResult, error) {
	return rackacts.PowerMachineResult{State: api.PowerStateOn}, p.enter("PowerMachine")
}

func (p *podActs) ComposeVM(_ context.Context, in rackacts.ComposeVMInput) (api.ComposedVM, error) {
	if err := p.enter("ComposeVM"); err != nil {
		return api.ComposedVM{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.vms[in.VM.UUID] = in.VM.Name
	return api.ComposedVM{Name: in.VM.Name, UUID: in.VM.UUID, MAC: "52:54:00:00:00:01"}, nil
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

func (p *podActs) UndoComposeVM(_ context.Context, in rackacts.ComposeVMInput) error {
	if err := p.enter("UndoComposeVM"); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.vms[in.VM.UUID] == in.VM.Name {
		delete(p.vms, in.VM.UUID)
	}
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
	return rackacts.PowerVMResult{State: api.PowerOff}, p.enter("PowerVM")
}

func podTarget() workflows.PodTarget {
	return workflows.PodTarget{Pod: podUUID, Rack: podRackUUID, Grant: "grant"}
}

// composeID is the workflow ID of the compose of composeInput.
var composeID = workflows.PodComposeID(podUUID, "vm-1")

func composeInput() workflows.PodComposeInput {
	return workflows.PodComposeInput{PodTarget: podTarget(), VM: api.PodVM{Name: "vm-1", Cores: 1, MemoryBytes: 1 << 30,
		Disks: []api.PodDisk{{Pool: "default", SizeBytes: 1 << 30}}, NIC: api.PodNIC{Bridge: "br0"}}}
}

// podEnv is a test environment with the pod workflows and acts, whose run is the workflow id.
func podEnv(acts *podActs, id string) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	for _, wf := range []any{workflows.PodCompose, workflows.PodDecompose, workflows.PodRefresh, workflows.PodPower} {
		env.RegisterWorkflow(wf)
	}
	env.RegisterActivity(acts)
	return env
}

func TestPodComposeDeclaresTheVMItComposed(t *testing.T) {
	acts := newPodActs()
	env := podEnv(acts, composeID)
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

// A compose whose declaration the region refuses is undone: the VM is removed (by its name
// and UUID) and its machine forgotten, so neither the pod nor the region keeps anything.
func TestPodComposeUndoesWhenTheDeclarationFails(t *testing.T) {
	acts := newPodActs()
	acts.fail["DeclareVM"] = temporal.NewNonRetryableApplicationError("machine Name vm-1 already exists", rackacts.ErrTypeRegionRefused, nil)
	env := podEnv(acts, composeID)
	env.ExecuteWorkflow(workflows.PodCompose, composeInput())
	err := env.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("workflow error %v, want the region's refusal", err)
	}
	equal(t, "activities", acts.journal(), []string{"VerifyPodGrant", "ComposeVM", "DeclareVM", "UndoComposeVM", "ForgetVM"})
	if len(acts.vms) != 0 || len(acts.machines) != 0 {
		t.Errorf("left behind: VMs %v, machines %v", acts.vms, acts.machines)
	}
}

// A compose cancelled while it declares the machine waits for that step to stop, then undoes
// the compose on a disconnected context.
func TestPodComposeCancelledIsUndone(t *testing.T) {
	acts := newPodActs()
	acts.block = make(chan struct{})
	env := podEnv(acts, composeID)
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
	equal(t, "activities", acts.journal(), []string{"VerifyPodGrant", "ComposeVM", "DeclareVM", "UndoComposeVM", "ForgetVM"})
	if len(acts.vms) != 0 {
		t.Errorf("VMs left after a cancelled compose: %v", acts.vms)
	}
}

// A name another VM has on the pod is refused, and that VM is left alone: no undo touches it.
func TestPodComposeNameClashUndoesNothing(t *testing.T) {
	acts := newPodActs()
	acts.vms["5e000000-0000-4000-8000-00000000000f"] = "vm-1"
	acts.fail["ComposeVM"] = temporal.NewNonRetryableApplicationError("pod kvm-01 already has a VM named vm-1", rackacts.ErrTypeNameClash, nil)
	env := podEnv(acts, composeID)
	env.ExecuteWorkflow(workflows.PodCompose, composeInput())
	if err := env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "already has a VM named vm-1") {
		t.Fatalf("workflow error %v", err)
	}
	equal(t, "activities", acts.journal(), []string{"VerifyPodGrant", "ComposeVM"})
	if len(acts.vms) != 1 {
		t.Errorf("the other VM: %v", acts.vms)
	}
}

// podRuns are one run of each pod workflow, under its canonical ID.
func podRuns() map[string]struct {
	wf any
	in any
	id string
} {
	machine := "5e000000-0000-4000-8000-000000000001"
	vm := workflows.PodVMInput{PodTarget: podTarget(), Machine: machine}
	return map[string]struct {
		wf any
		in any
		id string
	}{
		"compose":   {workflows.PodCompose, composeInput(), composeID},
		"decompose": {workflows.PodDecompose, vm, workflows.PodDecomposeID(machine)},
		"refresh":   {workflows.PodRefresh, podTarget(), workflows.PodRefreshID(podUUID)},
		"power":     {workflows.PodPower, workflows.PodPowerInput{PodVMInput: vm, Action: api.PowerOn}, workflows.PodPowerID(machine)},
	}
}

// A grant the region refuses (a readonly caller's, or none) stops every pod workflow before it
// touches the pod.
func TestPodWorkflowsStopAtARefusedGrant(t *testing.T) {
	for name, run := range podRuns() {
		acts := newPodActs()
		acts.fail["VerifyPodGrant"] = temporal.NewNonRetryableApplicationError("the region refused the grant", rackacts.ErrTypeGrantRefused, nil)
		env := podEnv(acts, run.id)
		env.ExecuteWorkflow(run.wf, run.in)
		if err := env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "refused the grant") {
			t.Errorf("%s: %v", name, err)
		}
		equal(t, name, acts.journal(), []string{"VerifyPodGrant"})
	}
}

// A pod workflow runs only under its subject's one ID (workflows/ids.go): under another, a
// second one on the same pod or machine would run beside it. It is refused before any step.
func TestPodWorkflowsRefuseAnotherWorkflowID(t *testing.T) {
	for name, run := range podRuns() {
		acts := newPodActs()
		env := podEnv(acts, "innocent-looking-id")
		env.ExecuteWorkflow(run.wf, run.in)
		err := env.GetWorkflowError()
		if errorType(err) != activities.ErrNonCanonicalWorkID || !strings.Contains(err.Error(), strconv.Quote(run.id)) {
			t.Errorf("%s: %v, want it refused naming %s", name, err, run.id)
		}
		equal(t, name, acts.journal(), nil)
	}
}

// The workflow gives the VM its UUID: one the caller chose could be a domain's that Ironflow
// never composed, which the compose would take for its own, declare into the pod's VMs and
// undo. It is refused before any step.
func TestPodComposeRefusesACallersVMUUID(t *testing.T) {
	acts := newPodActs()
	in := composeInput()
	in.VM.UUID = "5e000000-0000-4000-8000-0000000000aa"
	env := podEnv(acts, composeID)
	env.ExecuteWorkflow(workflows.PodCompose, in)
	if err := env.GetWorkflowError(); errorType(err) != rackacts.ErrTypeInvalidInput || !strings.Contains(err.Error(), "leave VM.UUID empty") {
		t.Fatalf("workflow error %v, want the caller's UUID refused", err)
	}
	equal(t, "activities", acts.journal(), nil)
}
