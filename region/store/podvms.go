package store

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
	regiondns "github.com/ironflow/ironflow/region/dns"
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

// DeclarePodVM creates the machine of a VM composed on the pod at podKey (which rack must
// host) from what the compose produced (declaredVM), and adds it to the pod's VMs. Declaring
// the same machine for the same pod again answers it as stored, so a retried declaration
// creates nothing twice.
func (s *Store) DeclarePodVM(ctx context.Context, by Principal, rack, podKey string, decl api.Machine) (api.Machine, error) {
	m, err := declaredVM(decl)
	if err != nil {
		return api.Machine{}, err
	}
	var out api.Machine
	err = s.tx(ctx, func(tx pgx.Tx) error {
		r, err := rackPod(ctx, tx, rack, podKey)
		if err != nil {
			return err
		}
		pod := r.obj
		var existing api.Machine
		err = machines.get(ctx, tx, m.Uuid, &existing)
		switch {
		case err == nil && existing.Pod != pod.Uuid:
			return conflictf("machine %s (%s) exists and is not a VM of pod %s", existing.Name, existing.Uuid, pod.Name)
		case err == nil:
			out = existing
		case errors.Is(classify(err), ErrNotFound):
			if err := nameFreeInDNS(ctx, tx, m.Name); err != nil {
				return err
			}
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

// declaredVM is the machine of a declaration as a compose sends it (activities/rack/pods.go,
// DeclareVM): the VM's UUID (its SMBIOS UUID too), its name, its one MAC, status New. A rack
// setting anything else would be choosing what is the operator's to choose (an address, the
// agent's secret, Meta, Locked, a pool), so such a declaration is refused whole.
func declaredVM(d api.Machine) (api.Machine, error) {
	rest := d
	rest.Uuid, rest.Name, rest.HardwareAddrs, rest.Status, rest.Fingerprint.SystemUUID = "", "", nil, "", ""
	if set := setFields(reflect.ValueOf(rest), ""); len(set) > 0 {
		return api.Machine{}, invalidf("a pod VM is declared with Uuid, Name, HardwareAddrs, Fingerprint.SystemUUID and Status only, not %s",
			strings.Join(set, ", "))
	}
	if d.Uuid == "" {
		return api.Machine{}, invalidf("a pod VM's machine needs the VM's Uuid")
	}
	if err := canonUUID("pod VM "+d.Name, "Uuid", &d.Uuid, false); err != nil {
		return api.Machine{}, err
	}
	switch {
	case len(d.HardwareAddrs) != 1:
		return api.Machine{}, invalidf("pod VM %s is declared with %d HardwareAddrs, want its one MAC", d.Name, len(d.HardwareAddrs))
	case d.Status != "" && d.Status != api.StatusNew:
		return api.Machine{}, invalidf("pod VM %s is declared with Status %q, want %s", d.Name, d.Status, api.StatusNew)
	case d.Fingerprint.SystemUUID != "" && !strings.EqualFold(d.Fingerprint.SystemUUID, d.Uuid):
		return api.Machine{}, invalidf("pod VM %s is declared with Fingerprint.SystemUUID %s, not its Uuid %s", d.Name, d.Fingerprint.SystemUUID, d.Uuid)
	}
	return api.Machine{Uuid: d.Uuid, Name: d.Name, HardwareAddrs: d.HardwareAddrs,
		Fingerprint: api.Fingerprint{SystemUUID: d.Uuid}, Status: api.StatusNew}, nil
}

// setFields names the JSON fields of v, a struct, that hold a value (an empty list or map
// holds none), looking into the structs it holds, prefixed by their field's name.
func setFields(v reflect.Value, prefix string) []string {
	var set []string
	for i := range v.NumField() {
		f := v.Field(i)
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		switch f.Kind() {
		case reflect.Struct:
			set = append(set, setFields(f, prefix+name+".")...)
		case reflect.Map, reflect.Slice:
			if f.Len() > 0 {
				set = append(set, prefix+name)
			}
		default:
			if !f.IsZero() {
				set = append(set, prefix+name)
			}
		}
	}
	return set
}

// nameFreeInDNS refuses a name whose host name in the default domain an operator's DNS
// record already owns: the machine's address record would take the name over (a CNAME next
// to other data is dropped, region/dns.Build).
func nameFreeInDNS(ctx context.Context, tx pgx.Tx, name string) error {
	var ds []api.Domain
	if err := domains.list(ctx, tx, ListOptions{}, &ds); err != nil {
		return err
	}
	def := regiondns.DefaultDomain(ds)
	if def == "" {
		return nil
	}
	var kind, rec string
	owned, err := queryFirst(ctx, tx, `SELECT doc->>'Type', uuid::text FROM dnsrecords
		WHERE CASE WHEN name = '@' THEN domain ELSE name || '.' || domain END = $1 ORDER BY seq LIMIT 1`,
		[]any{strings.ToLower(name) + "." + def}, &kind, &rec)
	if !owned {
		return err
	}
	return conflictf("pod VM %s would be %s.%s, which the operator's %s record %s already names; compose it under another name",
		name, strings.ToLower(name), def, kind, rec)
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
