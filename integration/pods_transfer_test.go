package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/dev/libvirtdtest"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// TestPodsFollowTheirRackToAnotherRegion: a rack transfer carries the rack's pod with its
// storage-pool facts and the machine of a VM composed on it; on the target region the pod is
// refreshed, a VM composed and both VMs decomposed through the rack, while the source region
// no longer has the pod.
func TestPodsFollowTheirRackToAnotherRegion(t *testing.T) {
	h := startPodHost(t)
	s := startStack(t, dev.StackOptions{RunWorker: true, PodSSHKey: h.rackKey})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, b := regionClient(s, "region-a"), regionClient(s, "region-b")
	rack := s.Racks["rack-a"]
	cliA, mustA := adminCLI(t, s, s.Regions["region-a"].URL)
	cliB, mustB := adminCLI(t, s, s.Regions["region-b"].URL)
	compose := func(must func(any, ...string)) api.Machine {
		t.Helper()
		name := fmt.Sprintf("ironflow-it-%d", time.Now().UnixNano())
		var m api.Machine
		must(&m, "pods", "compose", "kvm-t", "--name", name, "--memory", "128M", "--storage", h.pool+":1G", "--bridge", "br0")
		h.removeOnCleanup(t, name)
		return m
	}

	waitRackWorker(ctx, t, s, rack.Uuid)
	var pod api.Pod
	mustA(&pod, "pods", "add", "kvm-t", "--type", "virsh", "--address", "qemu:///system?socket="+h.socket, "--rack", "rack-a")
	mustA(&pod, "pods", "refresh", "kvm-t")
	before := compose(mustA)

	// A rack starts degraded until its first heartbeat after it has its config; only an online
	// rack is transferred.
	pollUntil(t, 30*time.Second, "rack-a online", func() (bool, error) {
		r, err := a.Racks().Get(ctx, rack.Uuid)
		return r.Status == api.RackOnline, err
	})
	in := workflows.TransferRackInput{SourceRegion: "region-a", TargetRegion: "region-b", Rack: rack.Uuid}
	in.Grant = grant(ctx, t, s, in.SourceRegion, api.GrantRequest{Kind: api.GrantRack, Key: rack.Uuid, TargetRegion: in.TargetRegion})
	run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.TransferRackID(rack.Uuid), TaskQueue: workflows.TaskQueue}, workflows.TransferRack, in)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.TransferRackResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	moved, err := b.Pods().Get(ctx, pod.Uuid)
	if err != nil || moved.Rack != rack.Uuid || !slices.EqualFunc(moved.StoragePools, pod.StoragePools, func(x, y api.PodStoragePool) bool { return x.Name == y.Name }) ||
		!slices.Equal(moved.VMs, []string{before.Uuid}) {
		t.Fatalf("pod on region-b: %+v (%v), want it with its pools and VM", moved, err)
	}
	assertGone(t, "pod on region-a", func() error { _, err := a.Pods().Get(ctx, pod.Uuid); return err })
	if out, err := cliA("pods", "refresh", pod.Uuid); err == nil {
		t.Errorf("refresh through region-a after the move: %s", out)
	}

	var refreshed api.Pod
	mustB(&refreshed, "pods", "refresh", "kvm-t")
	if refreshed.Arch == "" || !slices.ContainsFunc(refreshed.StoragePools, func(sp api.PodStoragePool) bool { return sp.Name == h.pool }) {
		t.Errorf("pod refreshed on region-b: %+v", refreshed)
	}
	after := compose(mustB)
	if after.Pod != pod.Uuid || after.Rack != rack.Uuid {
		t.Errorf("machine composed on region-b: %+v", after)
	}
	for _, m := range []api.Machine{before, after} {
		if out, err := cliB("pods", "decompose", "kvm-t", m.Uuid); err != nil {
			t.Fatalf("decompose %s on region-b: %v: %s", m.Name, err, out)
		}
		if h.hasDomain(t, m.Name) {
			t.Errorf("domain %s left", m.Name)
		}
	}
	if vols := libvirtdtest.Volumes(t, h.socket, h.pool); len(vols) != 0 {
		t.Errorf("volumes left: %v", vols)
	}
	if got, err := b.Pods().Get(ctx, pod.Uuid); err != nil || len(got.VMs) != 0 {
		t.Errorf("pod VMs on region-b after decompose: %v (%v)", got.VMs, err)
	}
	if out, err := cliB("machines", "show", before.Uuid); err == nil || !strings.Contains(out, "404") {
		t.Errorf("machine of the decomposed VM on region-b: %v: %s", err, out)
	}
}

// waitRackWorker waits until the rack's worker polls its task queue: it starts a moment after
// the rack serves, and until then the CLI refuses pod work at once (no one would do it).
func waitRackWorker(ctx context.Context, t *testing.T, s *dev.Stack, rack string) {
	t.Helper()
	pollUntil(t, time.Minute, "rack "+rack+"'s worker polling its task queue", func() (bool, error) {
		return moves.RackPolls(ctx, s.Client, rack) == nil, nil
	})
}
