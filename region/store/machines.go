package store

import (
	"context"
	"net/netip"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

var machines = newKind(kind[api.Machine]{
	name: api.KindMachines, noun: "machine", table: "machines",
	self:    func(m *api.Machine) *string { return &m.Uuid },
	genUUID: true, bare: "uuid",
	keys: map[string]string{
		"Uuid":          "uuid = $1::uuid",
		"Name":          "name = $1",
		"HardwareAddrs": "uuid IN (SELECT machine FROM machine_macs WHERE mac = $1)",
	},
	norm:  map[string]func(string) (string, error){"Uuid": normUUID, "HardwareAddrs": normMAC},
	order: "name, seq",
	columns: func(m *api.Machine) []column {
		return []column{{"uuid", m.Uuid}, {"name", m.Name}, {"pool", nullable(m.Pool)}}
	},
	validate: validateMachine,
	beforeDelete: func(ctx context.Context, tx pgx.Tx, by Principal, m *api.Machine, force bool) error {
		if err := refusePodVMDelete(ctx, m, force); err != nil {
			return err
		}
		return refuseHeldDelete(ctx, tx, by, m, force)
	},
	children: func(ctx context.Context, tx pgx.Tx, m *api.Machine) error {
		if err := replaceRelation(ctx, tx, "machine_macs", "machine", "mac", m.Uuid, m.HardwareAddrs); err != nil {
			return err
		}
		if err := replaceIdentities(ctx, tx, m); err != nil {
			return err
		}
		return replaceRelation(ctx, tx, "machine_profiles", "machine", "profile", m.Uuid, m.Profiles)
	},
})

func validateMachine(m *api.Machine) error {
	if err := validName("machine", m.Name, false); err != nil {
		return err
	}
	if err := canonMACs("machine "+m.Name, "HardwareAddrs", m.HardwareAddrs); err != nil {
		return err
	}
	if err := uniqueStrings("machine "+m.Name, "Profiles", m.Profiles); err != nil {
		return err
	}
	if m.BMCAddress != "" {
		a, err := netip.ParseAddr(m.BMCAddress)
		if err != nil {
			return invalidf("machine %s BMCAddress %q is not an IP address", m.Name, m.BMCAddress)
		}
		m.BMCAddress = a.String()
	}
	if m.Address != "" {
		if _, err := netip.ParseAddr(m.Address); err != nil {
			return invalidf("machine %s Address %q is not an IP address", m.Name, m.Address)
		}
	}
	if err := checkPending(m); err != nil {
		return err
	}
	dropAcceptedPending(m)
	return optionalUUIDs("machine "+m.Name, map[string]*string{"CurrentJob": &m.CurrentJob, "Rack": &m.Rack, "Pod": &m.Pod})
}

// replaceRelation makes the rows (owner, value) of a relation table exactly values.
func replaceRelation(ctx context.Context, tx pgx.Tx, table, ownerCol, valueCol, owner string, values []string) error {
	if _, err := tx.Exec(ctx, "DELETE FROM "+table+" WHERE "+ownerCol+" = $1", owner); err != nil {
		return err
	}
	if len(values) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, "INSERT INTO "+table+" ("+ownerCol+", "+valueCol+") SELECT $1, unnest($2::text[])", owner, values)
	return err
}

func normUUID(s string) (string, error) {
	if err := canonUUID("key", "value", &s, false); err != nil {
		return "", invalidf("%q is not a UUID", s)
	}
	return s, nil
}

// refusePodVMDelete refuses to delete alone the machine of a VM composed on a pod: its VM and
// volumes would stay on the pod with nothing pointing at them. Force deletes the record only;
// a migration deleting what it holds is not refused.
func refusePodVMDelete(ctx context.Context, m *api.Machine, force bool) error {
	if m.Pod == "" || force || actingFor(ctx) != "" {
		return nil
	}
	return classed(ErrInUse, "machine %s is a VM composed on pod %s: decompose it to remove the VM and its volumes too "+
		"(ironflow machines delete %s --decompose, or ironflow pods decompose), or delete it with force=true to delete only the machine and leave the VM on the pod",
		m.Name, m.Pod, m.Name)
}
