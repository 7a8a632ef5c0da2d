package store

import (
	"context"
	"errors"
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
	prepare:  keepPower,
	validate: validateMachine,
	check:    addressFree,
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
		a, err := netip.ParseAddr(m.Address)
		if err != nil {
			return invalidf("machine %s Address %q is not an IP address", m.Name, m.Address)
		}
		m.Address = a.String() // one spelling per address, so that addressFree compares text
	}
	if m.Image != nil {
		if err := errors.Join(api.ValidImageName(m.Image.Name), api.ValidSHA256(m.Image.SHA256)); err != nil {
			return invalidf("machine %s Image: %v", m.Name, err)
		}
	}
	if err := checkPending(m); err != nil {
		return err
	}
	dropAcceptedPending(m)
	return optionalUUIDs("machine "+m.Name, map[string]*string{"CurrentJob": &m.CurrentJob, "Rack": &m.Rack, "Pod": &m.Pod})
}

// addressLock is the first key of the pg_advisory_xact_lock pairs that serialise the writes
// giving a machine an address ("addr"); the second is the hash of the address.
const addressLock int32 = 0x61646472

// addressFree refuses to give machine m an Address another machine holds: each would get a
// DHCP reservation and a PTR for it. Every copy of a machine (an inactive import, a migrated
// stub) is the one row of its UUID, so a move never clashes with itself. Only a new or
// changed address is checked, so that machines which shared one before the rule existed keep
// working until one of them is readdressed.
func addressFree(ctx context.Context, tx pgx.Tx, m, old *api.Machine) error {
	if m.Address == "" || (old != nil && old.Address == m.Address) {
		return nil
	}
	// Two writes giving the address to two machines at once would both find it free: the
	// second waits here for the first to commit, then sees its row.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", addressLock, m.Address); err != nil {
		return err
	}
	// "<> ''" lets a generic plan use the partial index machines_address (migration 0083).
	var holder, holderUUID string
	held, err := queryFirst(ctx, tx,
		"SELECT name, uuid::text FROM machines WHERE doc->>'Address' = $1 AND doc->>'Address' <> '' AND uuid <> $2::uuid ORDER BY seq LIMIT 1",
		[]any{m.Address, m.Uuid}, &holder, &holderUUID)
	if !held {
		return err
	}
	return conflictf("machine %s Address %s is already the address of machine %s (%s): a machine's address is unique in the region",
		m.Name, m.Address, holder, holderUUID)
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
