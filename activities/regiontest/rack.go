package regiontest

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/ironflow/ironflow/region/api"
)

// The rack transfer primitives (activities.RackRegion), each as region/store/transfer.go
// defines it. The fake keeps a rack's network (fabrics, VLANs, subnets, pods, leases) as the
// bundle that brought it, and checks conflicts by rack, fabric, pod and machine name, subnet
// CIDR and MAC.

// rackState is a rack this region holds, with what moved with it.
type rackState struct {
	rack     api.Rack
	network  api.RackBundle // Fabrics, VLANs, Subnets, Pods, Leases, Pools
	imported bool           // created by ImportRack, so UndoRackImport removes it
}

// pendingOp is a queued operation of a rack or one of its machines.
type pendingOp struct {
	op     api.PendingOperation
	origin string // "region/id" of a handed-over operation
}

// PutRack stores a rack as it is, with the network of network (its Rack is ignored).
func (r *Region) PutRack(rack api.Rack, network api.RackBundle) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.racks[rack.Uuid] = &rackState{rack: rack, network: network}
}

// QueueRackOperation queues op for a paused rack or a machine behind it.
func (r *Region) QueueRackOperation(_ context.Context, rackUUID string, op api.PendingOperation) (api.PendingOperation, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.rack(rackUUID)
	if err != nil {
		return op, err
	}
	if s.rack.Status != api.RackPaused {
		return op, apiErr(http.StatusConflict, "rack %s is not paused; run the operation directly", s.rack.Name)
	}
	if m, ok := r.machines[op.Target]; op.Target != rackUUID && (!ok || m.Rack != rackUUID) {
		return op, apiErr(http.StatusUnprocessableEntity, "%s is neither rack %s nor a machine behind it", op.Target, s.rack.Name)
	}
	return r.queue(op, ""), nil
}

func (r *Region) queue(op api.PendingOperation, origin string) api.PendingOperation {
	r.opSeq++
	op.ID, op.Released = r.opSeq, false
	r.ops = append(r.ops, &pendingOp{op: op, origin: origin})
	return op
}

func (r *Region) rack(uuid string) (*rackState, error) {
	if s, ok := r.racks[uuid]; ok {
		return s, nil
	}
	return nil, apiErr(http.StatusNotFound, "rack %s not found", uuid)
}

// GetRack implements activities.RackRegion.
func (r *Region) GetRack(_ context.Context, key string) (api.Rack, error) {
	return rackOp(r, "GetRack", key, false, func(s *rackState) (api.Rack, error) { return s.rack, nil })
}

// rackOp runs fn on the rack with UUID rack, under the lock, once the call is recorded (if
// record) and no failure is injected.
func rackOp[T any](r *Region, method, rack string, record bool, fn func(*rackState) (T, error)) (T, error) {
	r.waitIfHeld(method)
	r.mu.Lock()
	defer r.mu.Unlock()
	var zero T
	if err := r.enter(method, rack, record); err != nil {
		return zero, err
	}
	s, err := r.rack(rack)
	if err != nil {
		return zero, err
	}
	return fn(s)
}

// PauseRack implements activities.RackRegion.
func (r *Region) PauseRack(_ context.Context, rack string, hold api.RackHold) (api.Rack, error) {
	if !hold.IsZero() {
		hold.Role = api.TransferSource
	}
	return r.setPaused("PauseRack", rack, true, hold)
}

// UnpauseRack implements activities.RackRegion.
func (r *Region) UnpauseRack(_ context.Context, rack string) (api.Rack, error) {
	return r.setPaused("UnpauseRack", rack, false, api.RackHold{})
}

// setPaused pauses the rack for hold, or ends its pause and hold; a rack paused by another
// run is refused.
func (r *Region) setPaused(method, rack string, paused bool, hold api.RackHold) (api.Rack, error) {
	return rackOp(r, method, rack, true, func(s *rackState) (api.Rack, error) {
		held := api.RackHoldOf(s.rack)
		sameRun := held.Transfer == hold.Transfer && held.Run == hold.Run
		if paused && s.rack.Status == api.RackPaused && !held.IsZero() && !hold.IsZero() && !sameRun {
			return s.rack, apiErr(http.StatusConflict, "rack %s is paused by transfer %s (run %s), which is not this one", s.rack.Name, held.Transfer, held.Run)
		}
		if (s.rack.Status == api.RackPaused) == paused && (held == hold || hold.IsZero() && paused) {
			return s.rack, nil
		}
		writePaused(s, paused, hold)
		return s.rack, nil
	})
}

// writePaused sets the rack of s paused or not, held by hold (zero: by no transfer).
func writePaused(s *rackState, paused bool, hold api.RackHold) {
	s.rack.Meta = maps.Clone(s.rack.Meta)
	if s.rack.Meta == nil {
		s.rack.Meta = map[string]string{}
	}
	hold.Record(s.rack.Meta)
	s.rack.Status = api.RackOffline // the fake's racks send no heartbeats
	if paused {
		s.rack.Status = api.RackPaused
	}
}

// RecoverRackTransfer implements activities.RackRegion as region/store/transfer_recovery.go
// does: the action is done on a rack rec.Hold still holds, nothing on a rack no longer held
// (Done false), and a rack another run holds is refused.
func (r *Region) RecoverRackTransfer(_ context.Context, rack string, rec api.RackRecovery) (api.RackRecovered, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("RecoverRackTransfer", rack+" "+rec.Action, true); err != nil {
		return api.RackRecovered{}, err
	}
	if rec.Hold.IsZero() || rec.Hold.Run == "" {
		return api.RackRecovered{}, apiErr(http.StatusUnprocessableEntity, "a recovery names the transfer run whose hold it ends (Hold.Transfer and Hold.Run)")
	}
	s, ok := r.racks[rack]
	if !ok {
		return api.RackRecovered{}, nil
	}
	switch held := api.RackHoldOf(s.rack); {
	case held.IsZero():
		return api.RackRecovered{}, nil
	case held != rec.Hold:
		return api.RackRecovered{}, apiErr(http.StatusConflict, "rack %s is held by transfer %s (run %s), not by run %s: nothing was recovered", s.rack.Name, held.Transfer, held.Run, rec.Hold.Run)
	}
	switch rec.Action {
	case api.RecoverUnpause:
		writePaused(s, false, api.RackHold{})
	case api.RecoverDeleteCopy:
		if s.imported {
			delete(r.racks, rack)
		}
	case api.RecoverHandOver:
		delete(r.racks, rack)
	default:
		return api.RackRecovered{}, apiErr(http.StatusUnprocessableEntity, "unknown recovery action %q", rec.Action)
	}
	return api.RackRecovered{Done: true}, nil
}

// ExportRack implements activities.RackRegion: the rack, its network and the machines
// behind it that have not moved (stubs are left out).
func (r *Region) ExportRack(_ context.Context, rack string) (api.RackBundle, error) {
	return rackOp(r, "ExportRack", rack, true, func(s *rackState) (api.RackBundle, error) {
		b := cloneNetwork(s.network)
		b.Rack = s.rack
		for _, uuid := range slices.Sorted(maps.Keys(r.machines)) {
			if m := r.machines[uuid]; m.Rack == rack && !isStub(m) {
				b.Machines = append(b.Machines, api.RackMachine{Uuid: m.Uuid, Name: m.Name, HardwareAddrs: slices.Clone(m.HardwareAddrs), Address: m.Address, Image: m.Image})
			}
		}
		return b, nil
	})
}

func cloneNetwork(b api.RackBundle) api.RackBundle {
	return api.RackBundle{
		Fabrics: slices.Clone(b.Fabrics), VLANs: slices.Clone(b.VLANs), Subnets: slices.Clone(b.Subnets),
		Pods: slices.Clone(b.Pods), Pools: slices.Clone(b.Pools), Leases: slices.Clone(b.Leases),
		Machines: []api.RackMachine{},
	}
}

// CheckRackImport implements activities.RackRegion.
func (r *Region) CheckRackImport(_ context.Context, b api.RackBundle) (api.TransferCheck, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("CheckRackImport", b.Rack.Uuid, false); err != nil {
		return api.TransferCheck{}, err
	}
	return api.TransferCheck{Conflicts: r.rackConflicts(b)}, nil
}

// rackConflicts lists what on this region holds a name, CIDR, MAC or address of b under
// another UUID.
func (r *Region) rackConflicts(b api.RackBundle) []string {
	conflicts := []string{}
	ours := map[string]bool{b.Rack.Uuid: true}
	for _, m := range b.Machines {
		ours[m.Uuid] = true
	}
	for _, uuid := range slices.Sorted(maps.Keys(r.racks)) {
		s := r.racks[uuid]
		if uuid != b.Rack.Uuid && s.rack.Name == b.Rack.Name {
			conflicts = append(conflicts, fmt.Sprintf("rack name %s is used by rack %s", s.rack.Name, uuid))
		}
		if uuid == b.Rack.Uuid {
			continue
		}
		for _, f := range s.network.Fabrics {
			if slices.ContainsFunc(b.Fabrics, func(g api.Fabric) bool { return g.Name == f.Name && g.Uuid != f.Uuid }) {
				conflicts = append(conflicts, fmt.Sprintf("fabric name %s is used by fabric %s", f.Name, f.Uuid))
			}
		}
		for _, sn := range s.network.Subnets {
			if slices.ContainsFunc(b.Subnets, func(o api.Subnet) bool { return o.CIDR == sn.CIDR && o.Uuid != sn.Uuid }) {
				conflicts = append(conflicts, fmt.Sprintf("subnet %s exists as subnet %s (%s)", sn.CIDR, sn.Name, sn.Uuid))
			}
		}
		for _, p := range s.network.Pods {
			if slices.ContainsFunc(b.Pods, func(o api.Pod) bool { return o.Name == p.Name && o.Uuid != p.Uuid }) {
				conflicts = append(conflicts, fmt.Sprintf("pod name %s is used by pod %s", p.Name, p.Uuid))
			}
		}
	}
	for _, uuid := range slices.Sorted(maps.Keys(r.machines)) {
		m := r.machines[uuid]
		if ours[uuid] {
			continue
		}
		for _, rm := range b.Machines {
			if rm.Name == m.Name {
				conflicts = append(conflicts, fmt.Sprintf("machine name %s is used by machine %s", m.Name, uuid))
			}
			for _, mac := range rm.HardwareAddrs {
				if slices.Contains(m.HardwareAddrs, mac) {
					conflicts = append(conflicts, fmt.Sprintf("MAC %s is used by machine %s (%s)", mac, m.Name, uuid))
				}
			}
		}
	}
	for _, rm := range b.Machines {
		if holder, ok := r.addressHolder(api.Machine{Uuid: rm.Uuid, Address: rm.Address}); ok && !ours[holder.Uuid] {
			conflicts = append(conflicts, fmt.Sprintf("Address %s is used by machine %s (%s)", rm.Address, holder.Name, holder.Uuid))
		}
		if missing, ok := r.missingImage(rm.Name, rm.Image); ok {
			conflicts = append(conflicts, missing)
		}
	}
	slices.Sort(conflicts)
	return conflicts
}

// ImportRack implements activities.RackRegion: refused (409) on any conflict, else the rack
// arrives paused without endpoints; a retried import creates nothing.
func (r *Region) ImportRack(_ context.Context, b api.RackBundle) (api.RackImport, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ImportRack", b.Rack.Uuid, true); err != nil {
		return api.RackImport{}, err
	}
	if c := r.rackConflicts(b); len(c) > 0 {
		return api.RackImport{}, apiErr(http.StatusConflict, "cannot import rack %s (%s): %v", b.Rack.Name, b.Rack.Uuid, c)
	}
	res := api.RackImport{Fabrics: len(b.Fabrics), VLANs: len(b.VLANs), Subnets: len(b.Subnets), Pods: len(b.Pods), Leases: len(b.Leases)}
	if _, ok := r.racks[b.Rack.Uuid]; !ok {
		res.Created = 1 + len(b.Fabrics) + len(b.VLANs) + len(b.Subnets) + len(b.Pods)
		rack := b.Rack
		rack.Status, rack.RegionEndpoints = api.RackPaused, []string{}
		rack.Meta = maps.Clone(rack.Meta)
		if rack.Meta == nil {
			rack.Meta = map[string]string{}
		}
		hold := api.RackHold{}
		if b.Hold != nil && !b.Hold.IsZero() {
			hold = *b.Hold
			hold.Role = api.TransferTarget
		}
		hold.Record(rack.Meta) // the source's hold, exported with the rack, is not the target's
		r.racks[rack.Uuid] = &rackState{rack: rack, network: cloneNetwork(b), imported: true}
	}
	return res, nil
}

// UndoRackImport implements activities.RackRegion: what the import created goes; undoing
// twice, or a rack this region did not import, changes nothing.
func (r *Region) UndoRackImport(_ context.Context, rack string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("UndoRackImport", rack, true); err != nil {
		return err
	}
	if s, ok := r.racks[rack]; ok && s.imported {
		delete(r.racks, rack)
	}
	return nil
}

// HandOverRack implements activities.RackRegion: a paused rack goes, with its network.
func (r *Region) HandOverRack(_ context.Context, rack string) error {
	_, err := rackOp(r, "HandOverRack", rack, true, func(s *rackState) (struct{}, error) {
		if s.rack.Status != api.RackPaused {
			return struct{}{}, apiErr(http.StatusConflict, "rack %s is %s, not paused by a transfer", s.rack.Name, s.rack.Status)
		}
		delete(r.racks, rack)
		return struct{}{}, nil
	})
	return err
}

// RackOperations implements activities.RackRegion: the unreleased operations of the rack
// and of the machines behind it, oldest first.
func (r *Region) RackOperations(_ context.Context, rack string) ([]api.PendingOperation, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("RackOperations", rack, false); err != nil {
		return nil, err
	}
	var out []api.PendingOperation
	for _, p := range r.ops {
		if !p.op.Released && r.isRackTarget(rack, p.op.Target) {
			out = append(out, p.op)
		}
	}
	return out, nil
}

func (r *Region) isRackTarget(rack, target string) bool {
	m, ok := r.machines[target]
	return target == rack || ok && m.Rack == rack
}

// ReleaseRackOperations implements activities.RackRegion: the handed-over operations are
// stored once (by origin), with the callers their origin recorded, then every unreleased
// operation of the rack is released.
func (r *Region) ReleaseRackOperations(_ context.Context, rack string, rel api.OperationsRelease) ([]api.PendingOperation, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ReleaseRackOperations", rack, true); err != nil {
		return nil, err
	}
	if len(rel.Operations) > 0 && rel.Origin == "" {
		return nil, apiErr(http.StatusUnprocessableEntity, "handed-over operations need the Origin region they were queued on")
	}
	if len(rel.Operations) > api.MaxQueuedOperations {
		return nil, apiErr(http.StatusRequestEntityTooLarge, "a hand-over carries at most the %d operations one rack's queue holds", api.MaxQueuedOperations)
	}
	handed := map[string]bool{}
	for _, op := range rel.Operations {
		origin := fmt.Sprintf("%s/%d", rel.Origin, op.ID)
		handed[origin] = true
		if !slices.ContainsFunc(r.ops, func(p *pendingOp) bool { return p.origin == origin }) {
			r.queue(op, origin)
		}
	}
	released := []api.PendingOperation{}
	for _, p := range r.ops {
		if !p.op.Released && (r.isRackTarget(rack, p.op.Target) || handed[p.origin]) {
			p.op.Released = true
			released = append(released, p.op)
		}
	}
	return released, nil
}
