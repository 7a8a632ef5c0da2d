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

	"github.com/ironflow/ironflow/internal/syslogmsg"
	"github.com/ironflow/ironflow/region/api"
)

// Reasons a syslog message of a rack's batch is refused (api.SyslogRejection.Reason and the
// label of the region's rejection metric).
const (
	SyslogInvalid   = "invalid"    // malformed: address, MAC, priority, times, lengths, control characters
	SyslogNotServed = "not_served" // its address is in no subnet of a VLAN the rack serves
	SyslogOtherRack = "other_rack" // another rack holds a live lease on its address
	SyslogNoMachine = "no_machine" // no machine has its MAC
	// SyslogOtherMachine: the machine with its MAC is not one the rack serves (see machinesByMAC).
	SyslogOtherMachine = "other_machine"
)

// syslogInsertLock is the pg_advisory_xact_lock key that serialises syslog inserts, so that
// IDs commit in increasing order and a follower asking for "After=ID" never misses a message
// committed late with a lower ID ("syslog" in ASCII).
const syslogInsertLock int64 = 0x7379736c6f67

// SyncSyslog stores a rack's syslog messages, each under the machine that has its MAC when
// the rack serves that machine, and records one audit event for the batch. Each message is
// judged alone (see the Syslog* reasons); the rest of the batch is stored.
func (s *Store) SyncSyslog(ctx context.Context, by Principal, rackUUID string, batch []api.SyslogMessage) (api.SyslogSyncResult, error) {
	if err := canonUUID("rack", "Uuid", &rackUUID, false); err != nil {
		return api.SyslogSyncResult{}, err
	}
	var res api.SyslogSyncResult
	reject := func(i int, reason string, err error) {
		res.Rejected = append(res.Rejected, api.SyslogRejection{Index: i, Reason: reason, Error: err.Error()})
	}
	var work []api.SyslogMessage
	var index []int
	for i, m := range batch {
		if err := validateSyslog(&m); err != nil {
			reject(i, SyslogInvalid, err)
			continue
		}
		m.Rack, m.ID, m.Machine = rackUUID, 0, ""
		work, index = append(work, m), append(index, i)
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := rackByUUID(ctx, tx, rackUUID, false); err != nil {
			return err
		}
		served, err := servedSubnets(ctx, tx, rackUUID)
		if err != nil {
			return err
		}
		subnets := make([]string, len(work))
		keys := make([]api.Lease, 0, len(work))
		macs := make([]string, 0, len(work))
		for j, m := range work {
			subnets[j] = subnetOf(served, netip.MustParseAddr(m.Addr))
			if subnets[j] != "" {
				keys = append(keys, api.Lease{Subnet: subnets[j], Addr: m.Addr})
				macs = append(macs, m.MAC)
			}
		}
		owners, err := liveLeaseOwners(ctx, tx, keys)
		if err != nil {
			return err
		}
		machines, err := machinesByMAC(ctx, tx, rackUUID, served, macs)
		if err != nil {
			return err
		}
		var machineCol []string
		var receivedCol []time.Time
		var docCol [][]byte
		for j, m := range work {
			switch owner := owners[leaseKey{subnets[j], m.Addr}]; {
			case subnets[j] == "":
				reject(index[j], SyslogNotServed, invalidf("address %s is in no subnet of a VLAN rack %s serves", m.Addr, rackUUID))
				continue
			case owner != "" && owner != rackUUID:
				reject(index[j], SyslogOtherRack, invalidf("address %s is leased by rack %s", m.Addr, owner))
				continue
			case machines[m.MAC].uuid == "":
				reject(index[j], SyslogNoMachine, invalidf("no machine has MAC %s (address %s)", m.MAC, m.Addr))
				continue
			case !machines[m.MAC].served:
				reject(index[j], SyslogOtherMachine, invalidf("machine %s (MAC %s) is not served by rack %s: it is not behind the rack, "+
					"its Address is in no subnet the rack serves and the rack holds no lease for the MAC", machines[m.MAC].name, m.MAC, rackUUID))
				continue
			}
			m.Machine = machines[m.MAC].uuid
			doc, err := json.Marshal(m)
			if err != nil {
				return fmt.Errorf("encode syslog message: %w", err)
			}
			machineCol, receivedCol, docCol = append(machineCol, m.Machine), append(receivedCol, m.Received), append(docCol, doc)
		}
		res.Stored = len(machineCol)
		if res.Stored > 0 {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", syslogInsertLock); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO syslog (machine, received, doc)
				SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::jsonb[])`, machineCol, receivedCol, docCol); err != nil {
				return err
			}
		}
		return recordEvent(ctx, tx, by, "sync", "syslog", rackUUID, map[string]any{"Stored": res.Stored, "Rejected": len(res.Rejected)})
	})
	if err != nil {
		return api.SyslogSyncResult{}, err
	}
	slices.SortFunc(res.Rejected, func(a, b api.SyslogRejection) int { return cmp.Compare(a.Index, b.Index) })
	return res, nil
}

// validateSyslog checks a message as a rack sent it and canonicalises its MAC and address.
func validateSyslog(m *api.SyslogMessage) error {
	addr, err := netip.ParseAddr(m.Addr)
	if err != nil {
		return invalidf("syslog message: Addr %q is not an IP address", m.Addr)
	}
	m.Addr = addr.Unmap().String()
	if m.MAC, err = normMAC(m.MAC); err != nil {
		return err
	}
	switch {
	case m.Facility < 0 || m.Facility > 23:
		return invalidf("syslog message: Facility %d is outside 0..23", m.Facility)
	case m.Severity < 0 || m.Severity > 7:
		return invalidf("syslog message: Severity %d is outside 0..7", m.Severity)
	case m.Received.IsZero():
		return invalidf("syslog message: Received is missing")
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"Hostname", m.Hostname, syslogmsg.MaxHostname}, {"App", m.App, syslogmsg.MaxApp}, {"ProcID", m.ProcID, syslogmsg.MaxProcID},
		{"MsgID", m.MsgID, syslogmsg.MaxMsgID}, {"Text", m.Text, syslogmsg.MaxText},
	} {
		if len(f.v) > f.max {
			return invalidf("syslog message: %s of %d bytes is longer than %d", f.name, len(f.v), f.max)
		}
		if err := syslogmsg.Clean(f.v); err != nil {
			return invalidf("syslog message: %s: %v", f.name, err)
		}
	}
	return nil
}

// subnetOf returns the UUID of the subnet of served that contains a, or "".
func subnetOf(served map[string]netip.Prefix, a netip.Addr) string {
	for id, p := range served {
		if p.Contains(a) {
			return id
		}
	}
	return ""
}

// macMachine is the machine that has a MAC, and whether the rack posting its syslog serves it.
type macMachine struct {
	uuid, name string
	served     bool
}

// machinesByMAC maps the MACs that belong to a machine to it. rack serves a machine (and may
// post its syslog) when the machine is behind it (Machine.Rack), when its Address, which is
// its reservation, is in a subnet the rack serves (served), when the rack holds an active,
// unexpired lease for the MAC, or when no rack holds the machine at all (no Rack, no Address,
// no other rack's live lease): a machine that just got a dynamic lease posts syslog before
// the rack's next lease upload reaches the region, and its messages come from an address the
// rack serves (checked before). A machine another rack holds in any of these ways stays its.
func machinesByMAC(ctx context.Context, tx pgx.Tx, rack string, served map[string]netip.Prefix, macs []string) (map[string]macMachine, error) {
	out := map[string]macMachine{}
	if len(macs) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, `SELECT mm.mac, m.uuid::text, m.name, coalesce(m.doc->>'Address', ''), coalesce(m.doc->>'Rack', ''),
			EXISTS (SELECT 1 FROM leases l WHERE l.mac = mm.mac AND l.doc->>'Rack' = $2 AND l.doc->>'State' = 'active'
				AND coalesce(nullif(l.doc->>'Expires', '0001-01-01T00:00:00Z')::timestamptz > now(), true)),
			EXISTS (SELECT 1 FROM leases l WHERE l.mac = mm.mac AND l.doc->>'Rack' <> $2 AND l.doc->>'State' = 'active'
				AND coalesce(nullif(l.doc->>'Expires', '0001-01-01T00:00:00Z')::timestamptz > now(), true))
		FROM machine_macs mm JOIN machines m ON m.uuid = mm.machine WHERE mm.mac = ANY($1)`, macs, rack)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var mac, addr, behind string
		var leased, leasedElsewhere bool
		var m macMachine
		if err := rows.Scan(&mac, &m.uuid, &m.name, &addr, &behind, &leased, &leasedElsewhere); err != nil {
			rows.Close()
			return nil, err
		}
		a, err := netip.ParseAddr(addr)
		unheld := behind == "" && addr == "" && !leasedElsewhere
		m.served = behind == rack || leased || (err == nil && subnetOf(served, a) != "") || unheld
		out[mac] = m
	}
	return out, rows.Err()
}

// SyslogQuery selects a machine's messages: received at or after Since (when set) and stored
// after the ID After, oldest first, paged by Offset and Limit.
type SyslogQuery struct {
	Machine string
	Since   time.Time
	After   int64
	Offset  int
	Limit   int
}

// Syslog returns the messages q selects.
func (s *Store) Syslog(ctx context.Context, q SyslogQuery) ([]api.SyslogMessage, error) {
	if err := canonUUID("machine", "Uuid", &q.Machine, false); err != nil {
		return nil, err
	}
	page, err := pageSQL(ListOptions{Offset: q.Offset, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	w := &where{}
	w.add("machine = $1", q.Machine)
	if !q.Since.IsZero() {
		w.add("received >= $1", q.Since)
	}
	if q.After > 0 {
		w.add("id > $1", q.After)
	}
	rows, err := s.pool.Query(ctx, "SELECT id, doc FROM syslog"+w.sql()+" ORDER BY id"+page, w.args...)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.SyslogMessage, error) {
		var id int64
		var doc []byte
		if err := r.Scan(&id, &doc); err != nil {
			return api.SyslogMessage{}, err
		}
		m, err := decode[api.SyslogMessage](doc)
		if err != nil {
			return api.SyslogMessage{}, fmt.Errorf("stored syslog message %d: %w", id, err)
		}
		m.ID = id
		return *m, nil
	})
	return out, classify(err)
}
