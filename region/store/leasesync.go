package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// Reasons a lease of a rack's batch is refused, the label of the rejection metric.
const (
	RejectInvalid   = "invalid"    // malformed: address, MAC, hostname, state, times
	RejectNotServed = "not_served" // its subnet is unknown or on no VLAN the rack serves
	RejectOtherRack = "other_rack" // it names another rack, or overwrites another rack's live lease
	// RejectWrongMachine: its MachineRef names a machine that does not have its MAC, which
	// would put the lease's address under that machine's name in DNS.
	RejectWrongMachine = "wrong_machine"
)

// LeaseRejection is one refused lease of a batch with the reason it is counted under.
type LeaseRejection struct {
	api.LeaseRejection
	Reason string
}

// LeaseSync is the outcome of SyncLeases.
type LeaseSync struct {
	Stored   int
	Rejected []LeaseRejection
}

// leaseKey is what identifies a stored lease.
type leaseKey struct{ subnet, addr string }

// SyncLeases upserts a rack's leases by Subnet+Addr (the last state sent wins) and records
// one audit event for the batch. Each lease is judged alone: a malformed one, one of a subnet
// the rack does not serve (unknown subnets included, so a deleted subnet cannot block a
// rack's uploads), one naming another rack, and one that would overwrite another rack's
// active, unexpired lease are rejected, as is one whose MachineRef names a machine that does
// not have its MAC, and the rest of the batch is stored. Leases without a
// Rack are the calling rack's.
func (s *Store) SyncLeases(ctx context.Context, by Principal, rackUUID string, batch []api.Lease) (LeaseSync, error) {
	if err := canonUUID("rack", "Uuid", &rackUUID, false); err != nil {
		return LeaseSync{}, err
	}
	var res LeaseSync
	reject := func(i int, l api.Lease, reason string, err error) {
		res.Rejected = append(res.Rejected, LeaseRejection{
			LeaseRejection: api.LeaseRejection{Index: i, IP: l.Addr, MAC: l.MAC, Error: err.Error()},
			Reason:         reason,
		})
	}
	latest := map[leaseKey]int{} // position in work
	var work []api.Lease
	var index []int // batch index of each work entry
	for i, l := range batch {
		orig := l
		if l.Rack == "" {
			l.Rack = rackUUID
		}
		if err := validateLease(&l); err != nil {
			reject(i, orig, RejectInvalid, err)
			continue
		}
		if l.Rack != rackUUID {
			reject(i, orig, RejectOtherRack, invalidf("lease %s was granted by rack %s, not by rack %s", l.Addr, l.Rack, rackUUID))
			continue
		}
		k := leaseKey{l.Subnet, l.Addr}
		if j, dup := latest[k]; dup {
			work[j], index[j] = l, i
			continue
		}
		latest[k] = len(work)
		work, index = append(work, l), append(index, i)
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := rackByUUID(ctx, tx, rackUUID, false); err != nil {
			return err
		}
		served, err := servedSubnets(ctx, tx, rackUUID)
		if err != nil {
			return err
		}
		owners, err := liveLeaseOwners(ctx, tx, work)
		if err != nil {
			return err
		}
		macOwners, err := macMachines(ctx, tx, work)
		if err != nil {
			return err
		}
		var subnetCol, addrCol, macCol []string
		var docCol [][]byte
		for j, l := range work {
			cidr, ok := served[l.Subnet]
			if !ok {
				reject(index[j], l, RejectNotServed, invalidf("lease %s: subnet %s is not on a VLAN rack %s serves", l.Addr, l.Subnet, rackUUID))
				continue
			}
			if _, err := inPrefix("lease", "Addr", l.Addr, cidr); err != nil {
				reject(index[j], l, RejectInvalid, err)
				continue
			}
			if owner := owners[leaseKey{l.Subnet, l.Addr}]; owner != "" && owner != rackUUID {
				reject(index[j], l, RejectOtherRack, invalidf("lease %s is held by rack %s", l.Addr, owner))
				continue
			}
			if l.MachineRef != "" && macOwners[l.MAC] != l.MachineRef {
				reject(index[j], l, RejectWrongMachine, invalidf("lease %s names machine %s, which does not have its MAC %s", l.Addr, l.MachineRef, l.MAC))
				continue
			}
			doc, err := json.Marshal(l)
			if err != nil {
				return fmt.Errorf("encode lease: %w", err)
			}
			subnetCol, addrCol, macCol, docCol = append(subnetCol, l.Subnet), append(addrCol, l.Addr), append(macCol, l.MAC), append(docCol, doc)
		}
		res.Stored = len(subnetCol)
		if res.Stored > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO leases (subnet, addr, mac, doc)
				SELECT * FROM unnest($1::uuid[], $2::inet[], $3::text[], $4::jsonb[])
				ON CONFLICT (subnet, addr) DO UPDATE SET mac = excluded.mac, doc = excluded.doc`,
				subnetCol, addrCol, macCol, docCol); err != nil {
				return err
			}
		}
		return recordEvent(ctx, tx, by, "sync", api.KindLeases, rackUUID, map[string]any{"Stored": res.Stored, "Rejected": len(res.Rejected)})
	})
	if err != nil {
		return LeaseSync{}, err
	}
	slices.SortFunc(res.Rejected, func(a, b LeaseRejection) int { return cmp.Compare(a.Index, b.Index) })
	return res, nil
}

// macMachines maps the MACs of ls that belong to a machine to its UUID.
func macMachines(ctx context.Context, tx pgx.Tx, ls []api.Lease) (map[string]string, error) {
	macs := make([]string, len(ls))
	for i, l := range ls {
		macs[i] = l.MAC
	}
	rows, err := tx.Query(ctx, "SELECT mac, machine::text FROM machine_macs WHERE mac = ANY($1)", macs)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var mac, machine string
	_, err = pgx.ForEachRow(rows, []any{&mac, &machine}, func() error {
		out[mac] = machine
		return nil
	})
	return out, err
}

// servedSubnets maps the subnets on the VLANs rack is primary or secondary rack of to their
// networks.
func servedSubnets(ctx context.Context, tx pgx.Tx, rack string) (map[string]netip.Prefix, error) {
	return subnetPrefixes(ctx, tx, `SELECT s.uuid::text, s.cidr FROM subnets s JOIN vlans v ON v.uuid = s.vlan
		WHERE v.primary_rack = $1 OR v.secondary_rack = $1`, rack)
}

// liveLeaseOwners returns, for the stored leases at the addresses of ls that are active and
// unexpired, the rack that holds each, locking those rows against a concurrent sync.
func liveLeaseOwners(ctx context.Context, tx pgx.Tx, ls []api.Lease) (map[leaseKey]string, error) {
	out := map[leaseKey]string{}
	if len(ls) == 0 {
		return out, nil
	}
	subnetCol, addrCol := make([]string, len(ls)), make([]string, len(ls))
	for i, l := range ls {
		subnetCol[i], addrCol[i] = l.Subnet, l.Addr
	}
	rows, err := tx.Query(ctx, `SELECT l.subnet::text, host(l.addr), l.doc FROM leases l
		JOIN unnest($1::uuid[], $2::inet[]) AS k(subnet, addr) ON l.subnet = k.subnet AND l.addr = k.addr
		WHERE l.doc->>'State' = 'active' FOR UPDATE OF l`, subnetCol, addrCol)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for rows.Next() {
		var subnet, addr string
		var doc []byte
		if err := rows.Scan(&subnet, &addr, &doc); err != nil {
			rows.Close()
			return nil, err
		}
		l, err := decode[api.Lease](doc)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("stored lease: %w", err)
		}
		if l.Expires.IsZero() || l.Expires.After(now) {
			out[leaseKey{subnet, addr}] = l.Rack
		}
	}
	return out, rows.Err()
}
