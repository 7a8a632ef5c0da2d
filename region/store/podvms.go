package store

import (
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// The writes a rack makes for the pods it hosts (region/api/rack.go): each is one
// transaction with the pod's row locked, so a refresh never leaves facts half from one
// hypervisor read and half from another, and two composes on one pod never lose a VM.

// StorePodFacts stores a refresh's facts on the pod at podKey, which rack must host.
func (s *Store) StorePodFacts(ctx context.Context, by Principal, rack, podKey string, f api.PodFacts) (api.Pod, error) {
	var out api.Pod
	err := s.tx(ctx, func(tx pgx.Tx) error {
		r, err := rackPod(ctx, tx, rack, podKey)
		if err != nil {
			return err
		}
		next := *r.obj
		next.Arch, next.Cores, next.MemoryMiB, next.StorageGiB = f.Arch, f.Cores, f.MemoryMiB, f.StorageGiB
		next.StoragePools, next.Networks = f.StoragePools, f.Networks
		stored, err := pods.write(ctx, tx, by, r.seq, r, &next)
		if err != nil {
			return err
		}
		out = *stored
		return nil
	})
	return out, err
}

// DeclarePodVM creates machine m for a VM composed on the pod at podKey (which rack must host)
// and adds it to the pod's VMs. Declaring the same machine for the same pod again answers it as
// stored, so a retried declaration creates nothing twice.
func (s *Store) DeclarePodVM(ctx context.Context, by Principal, rack, podKey string, m api.Machine) (api.Machine, error) {
	var out api.Machine
	err := s.tx(ctx, func(tx pgx.Tx) error {
		r, err := rackPod(ctx, tx, rack, podKey)
		if err != nil {
			return err
		}
		pod := r.obj
		if m.Uuid == "" {
			return invalidf("a pod VM's machine needs the VM's Uuid")
		}
		var existing api.Machine
		err = machines.get(ctx, tx, m.Uuid, &existing)
		switch {
		case err == nil && existing.Pod != pod.Uuid:
			return conflictf("machine %s (%s) exists and is not a VM of pod %s", existing.Name, existing.Uuid, pod.Name)
		case err == nil:
			out = existing
		case errors.Is(classify(err), ErrNotFound):
			m.Pod, m.Rack = pod.Uuid, rack
			if err := machines.create(ctx, tx, by, &m); err != nil {
				return err
			}
			out = m
		default:
			return err
		}
		if slices.Contains(pod.VMs, out.Uuid) {
			return nil
		}
		next := *pod
		next.VMs = append(slices.Clone(pod.VMs), out.Uuid)
		_, err = pods.write(ctx, tx, by, r.seq, r, &next)
		return err
	})
	return out, err
}

// ForgetPodVM deletes the machine of a VM decomposed from the pod at podKey (which rack must
// host) and removes it from the pod's VMs; a machine already gone is not an error.
func (s *Store) ForgetPodVM(ctx context.Context, by Principal, rack, podKey, machine string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		r, err := rackPod(ctx, tx, rack, podKey)
		if err != nil {
			return err
		}
		pod := r.obj
		var m api.Machine
		err = machines.get(ctx, tx, machine, &m)
		switch {
		case err == nil && m.Pod != pod.Uuid:
			return conflictf("machine %s (%s) is not a VM of pod %s", m.Name, m.Uuid, pod.Name)
		case err == nil:
			if err := machines.remove(ctx, tx, by, m.Uuid, true); err != nil { // force: its VM is gone
				return err
			}
		case errors.Is(classify(err), ErrNotFound):
			m.Uuid = machine
		default:
			return err
		}
		if !slices.Contains(pod.VMs, m.Uuid) {
			return nil
		}
		next := *pod
		next.VMs = slices.DeleteFunc(slices.Clone(pod.VMs), func(v string) bool { return v == m.Uuid })
		_, err = pods.write(ctx, tx, by, r.seq, r, &next)
		return err
	})
}

// rackPod locks the pod at key and refuses it unless rack hosts it.
func rackPod(ctx context.Context, tx pgx.Tx, rack, key string) (row[api.Pod], error) {
	r, err := pods.resolve(ctx, tx, key, true)
	if err != nil {
		return r, err
	}
	if r.obj.Rack != rack {
		return r, classed(ErrForbidden, "pod %s is hosted by rack %q, not by rack %s", r.obj.Name, r.obj.Rack, rack)
	}
	return r, nil
}
