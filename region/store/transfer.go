package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// Rack transfer (region/api/transfer.go): pause, export on the source; check, import and its
// undo on the target; the source's hand-over; the rack's queue of pending operations.

type moveKey struct{}

// AsMove marks ctx as a call of a move: the server sets it for an admin's api.HeaderMove (the
// workers' calls). What records, changes or ends a transfer's hold of a rack is the move's
// alone (refuseUnlessMove).
func AsMove(ctx context.Context) context.Context { return context.WithValue(ctx, moveKey{}, true) }

func isMove(ctx context.Context) bool { return ctx.Value(moveKey{}) != nil }

// refuseUnlessMove refuses (ErrForbidden) to do what to rack for the transfer run held (the
// rack's hold, or one a call names) unless ctx is the move's: a pause a move holds is ended
// by that move, or its recovery, only.
func refuseUnlessMove(ctx context.Context, rack string, held api.RackHold, what string) error {
	if held.IsZero() || isMove(ctx) {
		return nil
	}
	return classed(ErrForbidden, "rack %s: only transfer %s (run %s, %s→%s) itself may %s; cancel the transfer, or once it has ended run `ironflow racks recover %s`",
		rack, held.Transfer, held.Run, held.From, held.To, what, rack)
}

// PauseRack marks the rack paused: a transfer holds it, and operations for its machines are
// queued (QueueRackOperation) instead of run. hold, the transfer run pausing it, is recorded
// as the source's hold (api.RackHold; zero for a caller that names none). Pausing again for
// the same run only updates its hold (the copy adds the target); a rack another run holds is
// refused (ErrConflict): that run's leftover is recovered first (RecoverRackTransfer).
func (s *Store) PauseRack(ctx context.Context, by Principal, rackUUID string, hold api.RackHold) (api.Rack, error) {
	if !hold.IsZero() {
		hold.Role = api.TransferSource
	}
	return s.setRackPaused(ctx, by, rackUUID, true, hold)
}

// UnpauseRack ends a pause and the hold that came with it: the rack's Status follows its
// heartbeats again.
func (s *Store) UnpauseRack(ctx context.Context, by Principal, rackUUID string) (api.Rack, error) {
	return s.setRackPaused(ctx, by, rackUUID, false, api.RackHold{})
}

func (s *Store) setRackPaused(ctx context.Context, by Principal, rackUUID string, paused bool, hold api.RackHold) (api.Rack, error) {
	var stored *api.Rack
	err := s.tx(ctx, func(tx pgx.Tx) error {
		r, err := rackByUUID(ctx, tx, rackUUID, true)
		if err != nil {
			return err
		}
		stored = r.obj
		held := api.RackHoldOf(*r.obj)
		if err := refuseUnlessMove(ctx, r.obj.Name, hold, "name it in a pause"); err != nil {
			return err
		}
		if !paused {
			if err := refuseUnlessMove(ctx, r.obj.Name, held, "end its pause"); err != nil {
				return err
			}
		}
		sameRun := held.Transfer == hold.Transfer && held.Run == hold.Run
		if paused && r.obj.Status == api.RackPaused && !held.IsZero() && !hold.IsZero() && !sameRun {
			return conflictf("rack %s is paused by transfer %s (run %s, %s→%s), which is not this one; once it has ended, `ironflow racks recover %s` undoes or finishes what it left",
				r.obj.Name, held.Transfer, held.Run, held.From, held.To, r.obj.Name)
		}
		if (r.obj.Status == api.RackPaused) == paused && (held == hold || hold.IsZero() && paused) {
			return nil
		}
		stored, err = writePaused(ctx, tx, by, r, paused, hold)
		return err
	})
	if err != nil {
		return api.Rack{}, err
	}
	deriveStatus(stored, time.Now())
	return *stored, nil
}

// writePaused stores the locked rack r paused or not, held by hold (zero: by no transfer).
func writePaused(ctx context.Context, tx pgx.Tx, by Principal, r row[api.Rack], paused bool, hold api.RackHold) (*api.Rack, error) {
	next := *r.obj
	next.Meta = maps.Clone(r.obj.Meta)
	emptyMeta(&next.Meta)
	hold.Record(next.Meta)
	next.Status = api.RackOnline // derived as offline when the rack has gone silent
	if paused {
		next.Status = api.RackPaused
	}
	return racks.write(ctx, tx, by, r.seq, r, &next)
}

// ExportRack returns what moves with the rack besides its machines, read in one snapshot:
// the VLANs it serves with their fabrics and subnets, the leases of those subnets, the pods
// it hosts, the identity of the machines behind it that have not moved yet (a stub left by
// an earlier migration is not listed) and the pools of those pods and machines. A VLAN the rack shares with another rack refuses
// the export (ErrConflict): it cannot move with one of its racks only.
func (s *Store) ExportRack(ctx context.Context, rackUUID string) (api.RackBundle, error) {
	b := api.RackBundle{Fabrics: []api.Fabric{}, VLANs: []api.VLAN{}, Subnets: []api.Subnet{}, Pods: []api.Pod{}, Pools: []api.Pool{}, Leases: []api.Lease{}, Machines: []api.RackMachine{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		r, err := rackByUUID(ctx, tx, rackUUID, false)
		if err != nil {
			return err
		}
		b.Rack = *r.obj
		vlanRows, err := vlans.selectRows(ctx, tx, rackWhere("(primary_rack = $1 OR secondary_rack = $1)", b.Rack.Uuid), "")
		if err != nil {
			return err
		}
		var shared, vlanIDs []string
		fabricIDs := map[string]bool{}
		for _, v := range vlanRows {
			if v.obj.PrimaryRack != b.Rack.Uuid || v.obj.SecondaryRack != "" {
				shared = append(shared, fmt.Sprintf("vlan %s (primary %s, secondary %s)", vlanLabel(v.obj), v.obj.PrimaryRack, v.obj.SecondaryRack))
				continue
			}
			b.VLANs = append(b.VLANs, *v.obj)
			vlanIDs = append(vlanIDs, v.obj.Uuid)
			fabricIDs[v.obj.Fabric] = true
		}
		if len(shared) > 0 {
			return conflictf("rack %s shares %s with another rack; move that VLAN's other rack off it first", b.Rack.Name, strings.Join(shared, ", "))
		}
		fabricRows, err := fabrics.selectRows(ctx, tx, rackWhere("uuid = ANY($1::uuid[])", keys(fabricIDs)), "")
		if err != nil {
			return err
		}
		for _, f := range fabricRows {
			b.Fabrics = append(b.Fabrics, *f.obj)
		}
		subnetRows, err := subnets.selectRows(ctx, tx, rackWhere("vlan = ANY($1::uuid[])", vlanIDs), "")
		if err != nil {
			return err
		}
		subnetIDs := make([]string, len(subnetRows))
		for i, sn := range subnetRows {
			b.Subnets = append(b.Subnets, *sn.obj)
			subnetIDs[i] = sn.obj.Uuid
		}
		leaseRows, err := leases.selectRows(ctx, tx, rackWhere("subnet = ANY($1::uuid[])", subnetIDs), "")
		if err != nil {
			return err
		}
		for _, l := range leaseRows {
			b.Leases = append(b.Leases, *l.obj)
		}
		podRows, err := pods.selectRows(ctx, tx, rackWhere("rack = $1", b.Rack.Uuid), "")
		if err != nil {
			return err
		}
		poolNames := map[string]bool{}
		for _, p := range podRows {
			b.Pods = append(b.Pods, *p.obj)
			poolNames[p.obj.Pool] = true
		}
		machineRows, err := machines.selectRows(ctx, tx, rackWhere("doc->>'Rack' = $1 AND COALESCE(doc->'Meta'->>$2, '') = ''", b.Rack.Uuid, api.MetaRedirectEndpoint), "")
		if err != nil {
			return err
		}
		for _, m := range machineRows {
			b.Machines = append(b.Machines, api.RackMachine{Uuid: m.obj.Uuid, Name: m.obj.Name, HardwareAddrs: m.obj.HardwareAddrs, Address: m.obj.Address, Image: m.obj.Image})
			poolNames[m.obj.Pool] = true
		}
		poolRows, err := pools.selectRows(ctx, tx, rackWhere("name = ANY($1::text[])", keys(poolNames)), "")
		if err != nil {
			return err
		}
		for _, p := range poolRows {
			b.Pools = append(b.Pools, *p.obj)
		}
		return nil
	})
	if err != nil {
		return api.RackBundle{}, classify(err)
	}
	return b, nil
}

func rackWhere(cond string, args ...any) *where {
	w := &where{}
	w.add(cond, args...)
	return w
}

func keys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	return out
}

// CheckRackImport lists what on this region keeps b from being imported: another rack,
// fabric, subnet (by CIDR) or pod under the same name, or machines holding the Name, a MAC or
// the Address of a machine behind the rack, or an image a machine is deployed with that this
// region lacks. Objects with the bundle's own UUIDs are no conflict (an
// earlier attempt imported them).
func (s *Store) CheckRackImport(ctx context.Context, b api.RackBundle) (api.TransferCheck, error) {
	var res api.TransferCheck
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		res.Conflicts, err = importRackConflicts(ctx, tx, &b)
		return err
	})
	if err != nil {
		return api.TransferCheck{}, classify(err)
	}
	return res, nil
}

func importRackConflicts(ctx context.Context, tx pgx.Tx, b *api.RackBundle) ([]string, error) {
	clashes, err := importRackClashes(ctx, tx, b)
	if err != nil {
		return nil, err
	}
	deployed := make([]deployedImage, len(b.Machines))
	for i, m := range b.Machines {
		deployed[i] = deployedImage{m.Name, m.Image}
	}
	missing, err := missingImages(ctx, tx, deployed)
	return append(clashes, missing...), err
}

// importRackClashes lists the objects of this region holding what b's objects need unique.
func importRackClashes(ctx context.Context, tx pgx.Tx, b *api.RackBundle) ([]string, error) {
	if err := canonUUID("rack", "Uuid", &b.Rack.Uuid, false); err != nil {
		return nil, err
	}
	// Empty, not nil: a nil slice is sent as NULL, and "uuid <> ALL(NULL)" is never true.
	fabricIDs, fabricNames, subnetIDs, cidrs, podIDs, podNames := []string{}, []string{}, []string{}, []string{}, []string{}, []string{}
	machineIDs, machineNames, macs, addrs := []string{}, []string{}, []string{}, []string{}
	for _, f := range b.Fabrics {
		fabricIDs, fabricNames = append(fabricIDs, f.Uuid), append(fabricNames, f.Name)
	}
	for _, sn := range b.Subnets {
		p, err := parseCIDR("subnet "+sn.Name, sn.CIDR)
		if err != nil {
			return nil, err
		}
		subnetIDs, cidrs = append(subnetIDs, sn.Uuid), append(cidrs, p.String())
	}
	for _, p := range b.Pods {
		podIDs, podNames = append(podIDs, p.Uuid), append(podNames, p.Name)
	}
	for _, m := range b.Machines {
		machineIDs, machineNames = append(machineIDs, m.Uuid), append(machineNames, m.Name)
		for _, mac := range m.HardwareAddrs {
			n, err := normMAC(mac)
			if err != nil {
				return nil, invalidf("machine %s MAC %v", m.Name, err)
			}
			macs = append(macs, n)
		}
		if m.Address != "" {
			a, err := netip.ParseAddr(m.Address)
			if err != nil {
				return nil, invalidf("machine %s Address %q is not an IP address", m.Name, m.Address)
			}
			addrs = append(addrs, a.String())
		}
	}
	return queryStrings(ctx, tx, `
		SELECT 'rack name ' || name || ' is used by rack ' || uuid FROM racks WHERE name = $1 AND uuid <> $2::uuid
		UNION ALL
		SELECT 'fabric name ' || name || ' is used by fabric ' || uuid FROM fabrics WHERE name = ANY($3::text[]) AND uuid <> ALL($4::uuid[])
		UNION ALL
		SELECT 'subnet ' || cidr || ' exists as subnet ' || name || ' (' || uuid || ')' FROM subnets WHERE cidr = ANY($5::cidr[]) AND uuid <> ALL($6::uuid[])
		UNION ALL
		SELECT 'pod name ' || name || ' is used by pod ' || uuid FROM pods WHERE name = ANY($7::text[]) AND uuid <> ALL($8::uuid[])
		UNION ALL
		SELECT 'machine name ' || name || ' is used by machine ' || uuid FROM machines WHERE name = ANY($9::text[]) AND uuid <> ALL($10::uuid[])
		UNION ALL
		SELECT 'MAC ' || mm.mac || ' is used by machine ' || m.name || ' (' || m.uuid || ')'
			FROM machine_macs mm JOIN machines m ON m.uuid = mm.machine WHERE mm.mac = ANY($11::text[]) AND mm.machine <> ALL($10::uuid[])
		UNION ALL
		SELECT 'Address ' || (doc->>'Address') || ' is used by machine ' || name || ' (' || uuid || ')' FROM machines
			WHERE doc->>'Address' = ANY($12::text[]) AND doc->>'Address' <> '' AND uuid <> ALL($10::uuid[])
		ORDER BY 1`,
		b.Rack.Name, b.Rack.Uuid, fabricNames, fabricIDs, cidrs, subnetIDs, podNames, podIDs, machineNames, machineIDs, macs, addrs)
}

// ImportRack stores b on this region in one transaction, refusing it (ErrConflict, naming
// every conflict) when CheckRackImport finds any. Objects are upserted by UUID, so a retried
// import changes nothing; the rack arrives paused with no region endpoints (it registers
// when it moves), and leases are upserted by Subnet+Addr. The objects the import created are
// recorded for UndoRackImport, except pools: missing ones are created here, before the
// machines migrate in parallel, and kept (moved machines may be in them).
func (s *Store) ImportRack(ctx context.Context, by Principal, b api.RackBundle) (api.RackImport, error) {
	var res api.RackImport
	err := s.tx(ctx, func(tx pgx.Tx) error {
		conflicts, err := importRackConflicts(ctx, tx, &b)
		if err != nil {
			return err
		}
		if len(conflicts) > 0 {
			return conflictf("cannot import rack %s (%s): %s", b.Rack.Name, b.Rack.Uuid, strings.Join(conflicts, "; "))
		}
		switch cur, err := rackByUUID(ctx, tx, b.Rack.Uuid, true); {
		case err == nil:
			if err := refuseUnlessMove(ctx, cur.obj.Name, api.RackHoldOf(*cur.obj), "import over its copy"); err != nil {
				return err
			}
		case !errors.Is(err, ErrNotFound):
			return err
		}
		rack := b.Rack
		rack.Status, rack.RegionEndpoints = api.RackPaused, []string{}
		rack.Meta = maps.Clone(rack.Meta)
		emptyMeta(&rack.Meta)
		hold := api.RackHold{}
		if b.Hold != nil && !b.Hold.IsZero() {
			if err := refuseUnlessMove(ctx, rack.Name, *b.Hold, "name it in an import"); err != nil {
				return err
			}
			hold = *b.Hold
			hold.Role = api.TransferTarget
		}
		hold.Record(rack.Meta) // the source's hold, exported with the rack, is not the target's
		rec := importRecorder{tx: tx, by: by, rack: rack.Uuid, res: &res}
		if err := upsertImported(ctx, rec, racks, &rack); err != nil {
			return err
		}
		for i := range b.Fabrics {
			if err := upsertImported(ctx, rec, fabrics, &b.Fabrics[i]); err != nil {
				return err
			}
		}
		for i := range b.VLANs {
			if b.VLANs[i].PrimaryRack != rack.Uuid || b.VLANs[i].SecondaryRack != "" {
				return invalidf("vlan %s of the bundle is not served by rack %s alone", vlanLabel(&b.VLANs[i]), rack.Uuid)
			}
			if err := upsertImported(ctx, rec, vlans, &b.VLANs[i]); err != nil {
				return err
			}
		}
		for i := range b.Subnets {
			if err := upsertImported(ctx, rec, subnets, &b.Subnets[i]); err != nil {
				return err
			}
		}
		for _, p := range b.Pools {
			if err := ensurePoolLike(ctx, tx, by, p); err != nil {
				return err
			}
		}
		for i := range b.Pods {
			if b.Pods[i].Rack != rack.Uuid {
				return invalidf("pod %s of the bundle is hosted by rack %s, not %s", b.Pods[i].Name, b.Pods[i].Rack, rack.Uuid)
			}
			if err := ensurePool(ctx, tx, by, b.Pods[i].Pool); err != nil {
				return err
			}
			if err := upsertImported(ctx, rec, pods, &b.Pods[i]); err != nil {
				return err
			}
		}
		res.Fabrics, res.VLANs, res.Subnets, res.Pods = len(b.Fabrics), len(b.VLANs), len(b.Subnets), len(b.Pods)
		if res.Leases, err = upsertLeases(ctx, tx, b.Leases); err != nil {
			return err
		}
		return recordEvent(ctx, tx, by, "import", api.KindRacks, rack.Uuid, map[string]any{
			"Fabrics": res.Fabrics, "VLANs": res.VLANs, "Subnets": res.Subnets, "Pods": res.Pods, "Leases": res.Leases, "Created": res.Created})
	})
	if err != nil {
		return api.RackImport{}, err
	}
	return res, nil
}

// ensurePoolLike creates p when this region has no pool of its name.
func ensurePoolLike(ctx context.Context, tx pgx.Tx, by Principal, p api.Pool) error {
	_, err := pools.resolve(ctx, tx, p.Name, true)
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	return pools.create(ctx, tx, by, &p)
}

// importRecorder writes the objects of one rack import and records those it creates.
type importRecorder struct {
	tx   pgx.Tx
	by   Principal
	rack string
	res  *api.RackImport
}

// upsertImported creates obj or replaces the object with its UUID; a created object is
// recorded in rack_imports.
func upsertImported[T any](ctx context.Context, rec importRecorder, k *kind[T], obj *T) error {
	normalize(obj)
	id := *k.self(obj)
	if err := canonUUID(k.noun, "Uuid", &id, false); err != nil {
		return err
	}
	cur, err := k.resolve(ctx, rec.tx, id, true)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if _, err := k.write(ctx, rec.tx, rec.by, cur.seq, cur, obj); err != nil {
		return err
	}
	if cur.obj != nil {
		return nil
	}
	rec.res.Created++
	_, err = rec.tx.Exec(ctx, "INSERT INTO rack_imports (rack, kind, key) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", rec.rack, k.name, id)
	return err
}

// upsertLeases stores leases by Subnet+Addr, checking each against its subnet.
func upsertLeases(ctx context.Context, tx pgx.Tx, ls []api.Lease) (int, error) {
	if len(ls) == 0 {
		return 0, nil
	}
	cidrs, err := subnetCIDRs(ctx, tx, ls)
	if err != nil {
		return 0, err
	}
	var subnetCol, addrCol, macCol []string
	var docCol [][]byte
	for i := range ls {
		l := ls[i]
		if err := validateLease(&l); err != nil {
			return 0, err
		}
		cidr, ok := cidrs[l.Subnet]
		if !ok {
			return 0, invalidf("lease %s: subnet %s is not part of the import", l.Addr, l.Subnet)
		}
		if _, err := inPrefix("lease", "Addr", l.Addr, cidr); err != nil {
			return 0, err
		}
		doc, err := json.Marshal(l)
		if err != nil {
			return 0, fmt.Errorf("encode lease: %w", err)
		}
		subnetCol, addrCol, macCol, docCol = append(subnetCol, l.Subnet), append(addrCol, l.Addr), append(macCol, l.MAC), append(docCol, doc)
	}
	_, err = tx.Exec(ctx, `INSERT INTO leases (subnet, addr, mac, doc)
		SELECT * FROM unnest($1::uuid[], $2::inet[], $3::text[], $4::jsonb[])
		ON CONFLICT (subnet, addr) DO UPDATE SET mac = excluded.mac, doc = excluded.doc`,
		subnetCol, addrCol, macCol, docCol)
	return len(subnetCol), err
}

// UndoRackImport deletes what imports of the rack created here (its leases go with their
// subnets), most dependent first, and forgets the record. Undoing twice changes nothing.
func (s *Store) UndoRackImport(ctx context.Context, by Principal, rackUUID string) error {
	if err := canonUUID("rack", "Uuid", &rackUUID, false); err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error { return undoRackImport(ctx, tx, by, rackUUID) })
}

// undoRackImport is UndoRackImport inside tx.
func undoRackImport(ctx context.Context, tx pgx.Tx, by Principal, rackUUID string) error {
	switch r, err := rackByUUID(ctx, tx, rackUUID, true); {
	case err == nil:
		if err := refuseUnlessMove(ctx, r.obj.Name, api.RackHoldOf(*r.obj), "delete its copy"); err != nil {
			return err
		}
	case !errors.Is(err, ErrNotFound):
		return err
	}
	steps := []func() error{
		func() error { return deleteImported(ctx, tx, by, pods, rackUUID) },
		func() error { return deleteImported(ctx, tx, by, subnets, rackUUID) },
		func() error { return deleteImported(ctx, tx, by, vlans, rackUUID) },
		func() error { return deleteImported(ctx, tx, by, fabrics, rackUUID) },
		func() error { return deleteImported(ctx, tx, by, racks, rackUUID) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, "DELETE FROM rack_imports WHERE rack = $1", rackUUID); err != nil {
		return err
	}
	return dropQueuedWrites(ctx, tx, by, rackUUID)
}

func deleteImported[T any](ctx context.Context, tx pgx.Tx, by Principal, k *kind[T], rackUUID string) error {
	ids, err := queryStrings(ctx, tx, "SELECT key::text FROM rack_imports WHERE rack = $1 AND kind = $2 ORDER BY seq DESC", rackUUID, k.name)
	if err != nil {
		return err
	}
	for _, id := range ids {
		r, err := k.resolve(ctx, tx, id, true)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if err := k.deleteRow(ctx, tx, by, r, map[string]any{"Reason": "rack transfer undone"}); err != nil {
			return err
		}
	}
	return nil
}

// HandOverRack removes a paused rack that has moved to another region, without force: it
// first deletes what moved with it (the subnets and VLANs it alone serves, fabrics left
// empty, the pods it hosts), so the ordinary delete finds nothing that needs force. A rack
// that is not paused is refused: only a transfer hands a rack over.
func (s *Store) HandOverRack(ctx context.Context, by Principal, rackUUID string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		r, err := rackByUUID(ctx, tx, rackUUID, true)
		if err != nil {
			return err
		}
		return handOverRack(ctx, tx, by, r)
	})
}

func handOverRack(ctx context.Context, tx pgx.Tx, by Principal, r row[api.Rack]) error {
	if err := refuseUnlessMove(ctx, r.obj.Name, api.RackHoldOf(*r.obj), "hand it over"); err != nil {
		return err
	}
	if r.obj.Status != api.RackPaused {
		return conflictf("rack %s is %s, not paused by a transfer; delete it with `ironflow racks delete` instead", r.obj.Name, r.obj.Status)
	}
	details := map[string]any{"Reason": "rack " + r.obj.Name + " transferred"}
	vlanRows, err := vlans.selectRows(ctx, tx, rackWhere("primary_rack = $1 AND secondary_rack IS NULL", r.obj.Uuid), " FOR UPDATE")
	if err != nil {
		return err
	}
	fabricIDs := map[string]bool{}
	for _, v := range vlanRows {
		subnetRows, err := subnets.selectRows(ctx, tx, rackWhere("vlan = $1", v.obj.Uuid), " FOR UPDATE")
		if err != nil {
			return err
		}
		for _, sn := range subnetRows {
			if err := subnets.deleteRow(ctx, tx, by, sn, details); err != nil {
				return err
			}
		}
		if err := vlans.deleteRow(ctx, tx, by, v, details); err != nil {
			return err
		}
		fabricIDs[v.obj.Fabric] = true
	}
	emptyFabrics, err := fabrics.selectRows(ctx, tx, rackWhere("uuid = ANY($1::uuid[]) AND NOT EXISTS (SELECT 1 FROM vlans WHERE vlans.fabric = fabrics.uuid)", keys(fabricIDs)), " FOR UPDATE")
	if err != nil {
		return err
	}
	for _, f := range emptyFabrics {
		if err := fabrics.deleteRow(ctx, tx, by, f, details); err != nil {
			return err
		}
	}
	podRows, err := pods.selectRows(ctx, tx, rackWhere("rack = $1", r.obj.Uuid), " FOR UPDATE")
	if err != nil {
		return err
	}
	for _, p := range podRows {
		if err := pods.deleteRow(ctx, tx, by, p, details); err != nil {
			return err
		}
	}
	return racks.remove(ctx, tx, by, r.obj.Uuid, false)
}

// rackOpsWhere selects the operations of a rack: those for the rack itself and for the
// machines behind it (a migrated stub included).
const rackOpsWhere = "(target = $1::uuid OR target IN (SELECT uuid FROM machines WHERE doc->>'Rack' = $1::text))"

// QueueRackOperation queues op for a paused rack or one of the machines behind it, as by; it
// runs when the transfer releases the queue. A rack that is not paused refuses (ErrConflict):
// run the operation directly. A rack whose queue holds api.MaxQueuedOperations operations
// not yet released or settled, or api.MaxQueuedBytes of payload, refuses more (ErrFull).
func (s *Store) QueueRackOperation(ctx context.Context, by Principal, rackUUID string, op *api.PendingOperation) error {
	target := op.Target
	if err := canonUUID("pending operation", "Target", &target, false); err != nil {
		return err
	}
	size, err := payloadSize(op.Payload)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		// Locked, so that concurrent writes cannot queue past the cap together.
		r, err := rackByUUID(ctx, tx, rackUUID, true)
		if err != nil {
			return err
		}
		if r.obj.Status != api.RackPaused {
			return conflictf("rack %s is not paused; run the operation directly", r.obj.Name)
		}
		if target != r.obj.Uuid {
			m, err := machines.resolve(ctx, tx, target, false)
			if err != nil {
				return err
			}
			if m.obj.Rack != r.obj.Uuid {
				return invalidf("machine %s is behind rack %q, not rack %s", m.obj.Name, m.obj.Rack, r.obj.Name)
			}
		}
		var queued, bytes int
		if err := tx.QueryRow(ctx, "SELECT count(*), coalesce(sum(octet_length(payload::text)), 0) FROM pending_operations WHERE "+queueHeldWhere+" AND "+rackOpsWhere,
			r.obj.Uuid).Scan(&queued, &bytes); err != nil {
			return err
		}
		switch {
		case queued >= api.MaxQueuedOperations:
			return classed(ErrFull, "rack %s already has %d queued operations, the most it may hold; retry once its transfer has finished", r.obj.Name, queued)
		case bytes+size > api.MaxQueuedBytes:
			return classed(ErrFull, "rack %s already has %d bytes of queued operations, and this one's %d would pass the most it may hold (%d); retry once its transfer has finished",
				r.obj.Name, bytes, size, api.MaxQueuedBytes)
		}
		return insertOperation(ctx, tx, by, op)
	})
}

// queueHeldWhere selects the operations a rack's queue still holds: not released, or writes
// released but not settled yet (a hand-over's, waiting for their replay).
const queueHeldWhere = "(NOT released OR (kind = '" + api.OperationWrite + "' AND done IS NULL))"

// payloadSize is the size of payload as the queue counts it: its compact JSON, which is no
// larger than the text PostgreSQL counts (octet_length(payload::text)).
func payloadSize(payload map[string]any) (int, error) {
	var doc bytes.Buffer
	enc := json.NewEncoder(&doc)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(payload); err != nil {
		return 0, invalidf("operation payload: %v", err)
	}
	return doc.Len() - 1, nil // without Encode's newline
}

// RackOperations lists the unreleased operations of the rack, oldest first.
func (s *Store) RackOperations(ctx context.Context, rackUUID string) ([]api.PendingOperation, error) {
	if err := canonUUID("rack", "Uuid", &rackUUID, false); err != nil {
		return nil, err
	}
	ops, err := scanOperations(s.pool.Query(ctx, "SELECT "+operationColumns+" FROM pending_operations WHERE NOT released AND "+rackOpsWhere+" ORDER BY id", rackUUID))
	return ops, classify(err)
}

// ReleaseRackOperations stores the operations handed over from rel.Origin (once: a retried
// hand-over adds nothing), each with the caller the origin recorded, then marks every
// unreleased operation of the rack released and returns them, oldest first. A hand-over
// carries at most what one rack's queue holds (api.MaxQueuedOperations, api.MaxQueuedBytes).
func (s *Store) ReleaseRackOperations(ctx context.Context, by Principal, rackUUID string, rel api.OperationsRelease) ([]api.PendingOperation, error) {
	if err := canonUUID("rack", "Uuid", &rackUUID, false); err != nil {
		return nil, err
	}
	if !isMove(ctx) {
		return nil, classed(ErrForbidden, "only a rack transfer releases a rack's queue (the workers' calls, marked %s)", api.HeaderMove)
	}
	if len(rel.Operations) > 0 && rel.Origin == "" {
		return nil, invalidf("handed-over operations need the Origin region they were queued on")
	}
	if len(rel.Operations) > api.MaxQueuedOperations {
		return nil, classed(ErrTooLarge, "a hand-over carries at most the %d operations one rack's queue holds, not %d", api.MaxQueuedOperations, len(rel.Operations))
	}
	total := 0
	for _, op := range rel.Operations {
		size, err := payloadSize(op.Payload)
		if err != nil {
			return nil, err
		}
		if total += size; total > api.MaxQueuedBytes {
			return nil, classed(ErrTooLarge, "a hand-over carries at most the %d bytes of payload one rack's queue holds", api.MaxQueuedBytes)
		}
	}
	var released []api.PendingOperation
	origins := make([]string, 0, len(rel.Operations))
	err := s.tx(ctx, func(tx pgx.Tx) error {
		for _, op := range rel.Operations {
			target := op.Target
			if err := canonUUID("pending operation", "Target", &target, false); err != nil {
				return err
			}
			if op.Kind == "" {
				return invalidf("pending operation %d for %s has no Kind", op.ID, target)
			}
			payload := op.Payload
			if payload == nil {
				payload = map[string]any{}
			}
			origin := fmt.Sprintf("%s/%d", rel.Origin, op.ID)
			if _, err := tx.Exec(ctx, `INSERT INTO pending_operations (target, kind, payload, created, origin, queued_by, queued_role)
				VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (origin) DO NOTHING`,
				target, op.Kind, payload, op.Created, origin, op.QueuedBy, op.QueuedRole); err != nil {
				return err
			}
			origins = append(origins, origin)
		}
		// Handed-over operations are the rack's by construction, even for a machine that has
		// not arrived here.
		var err error
		released, err = scanOperations(tx.Query(ctx, "UPDATE pending_operations SET released = true WHERE NOT released AND ("+rackOpsWhere+
			" OR origin = ANY($2::text[])) RETURNING "+operationColumns, rackUUID, origins))
		if err != nil {
			return err
		}
		if err := settleHandedOver(ctx, tx, rackUUID, released); err != nil {
			return err
		}
		return recordEvent(ctx, tx, by, "release", operationsKind, rackUUID, map[string]any{"Released": len(released), "Origin": rel.Origin})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(released, func(a, b api.PendingOperation) int { return cmp.Compare(a.ID, b.ID) })
	return released, nil
}

// operationColumns are the columns scanOperations reads.
const operationColumns = "id, target::text, kind, payload, created, released, done, outcome, queued_by, queued_role"

func scanOperations(rows pgx.Rows, err error) ([]api.PendingOperation, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.PendingOperation, error) {
		var op api.PendingOperation
		err := r.Scan(&op.ID, &op.Target, &op.Kind, &op.Payload, &op.Created, &op.Released, &op.Done, &op.Outcome, &op.QueuedBy, &op.QueuedRole)
		return op, err
	})
}
