package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// The rack controller API of the store (region/api/rack.go): the registration secret,
// registration with a token for the rack's own user, the rack config, heartbeats and lease
// sync.

// RackUser is the user a rack's tokens belong to.
func RackUser(rackUUID string) string { return "rack:" + rackUUID }

// Rack meta keys maintained by heartbeats.
const (
	MetaStatusReason  = "status-reason"  // why the rack says it is degraded
	MetaCurrentRegion = "current-region" // the region endpoint the rack talks to first
)

// staleAfter is how long after its last heartbeat a rack counts as offline.
const staleAfter = 3 * api.RackHeartbeatInterval

// RackStatus derives the Status a rack is shown with at now: "paused" while a transfer holds
// it, "offline" when not seen within three heartbeat intervals, else what its last heartbeat
// said ("degraded" or "online"). stored is the Status field as written; a rack that never
// registered nor beat (zero lastSeen, e.g. created by an operator) keeps it.
func RackStatus(stored string, lastSeen, now time.Time) string {
	switch {
	case stored == api.RackPaused, lastSeen.IsZero():
		return stored
	case now.Sub(lastSeen) > staleAfter:
		return api.RackOffline
	case stored == api.RackDegraded:
		return api.RackDegraded
	}
	return api.RackOnline
}

// rackStatusView serves racks with their derived Status on every read; writes go to the
// racks kind unchanged.
type rackStatusView struct{ *kind[api.Rack] }

func (v rackStatusView) get(ctx context.Context, q querier, key string, out any) error {
	if err := v.kind.get(ctx, q, key, out); err != nil {
		return err
	}
	deriveStatus(out.(*api.Rack), time.Now())
	return nil
}

func (v rackStatusView) list(ctx context.Context, q querier, opts ListOptions, out any) error {
	if err := v.kind.list(ctx, q, opts, out); err != nil {
		return err
	}
	now := time.Now()
	for i := range *out.(*[]api.Rack) {
		deriveStatus(&(*out.(*[]api.Rack))[i], now)
	}
	return nil
}

func deriveStatus(r *api.Rack, now time.Time) {
	r.Status = RackStatus(r.Status, r.LastSeen, now)
}

// RackSecret returns the region's stored rack secret, minting it on first use. Concurrent
// first calls of several region processes agree on one secret.
func (s *Store) RackSecret(ctx context.Context) (string, error) {
	fresh, err := newToken()
	if err != nil {
		return "", err
	}
	// Two statements: the SELECT's snapshot then includes a secret that a concurrent first
	// call committed while this INSERT waited for it.
	if _, err := s.pool.Exec(ctx, "INSERT INTO rack_secret (secret) VALUES ($1) ON CONFLICT (singleton) DO NOTHING", fresh); err != nil {
		return "", classify(err)
	}
	var secret string
	err = s.pool.QueryRow(ctx, "SELECT secret FROM rack_secret").Scan(&secret)
	return secret, classify(err)
}

// RegisterRack creates the rack reg.Uuid (a new UUID when empty) or updates its Name,
// Interfaces and Version, records endpoints (the region cluster's URLs) as its
// RegionEndpoints, and mints a new token for the rack's user RackUser(uuid), role rack.
// Unless reclaim (the caller proved to be the rack or an admin), a rack that already holds a
// token in this region is refused (ErrConflict): the shared rack secret claims an identity
// once. Earlier tokens stay valid.
func (s *Store) RegisterRack(ctx context.Context, reg api.RackRegistration, endpoints []string, reclaim bool) (api.Rack, api.Token, error) {
	id := reg.Uuid
	if id == "" {
		id = uuid.NewString()
	}
	if err := canonUUID("rack", "Uuid", &id, false); err != nil {
		return api.Rack{}, api.Token{}, err
	}
	raw, err := newToken()
	if err != nil {
		return api.Rack{}, api.Token{}, err
	}
	by := Principal{User: RackUser(id), Role: api.RoleRack}
	var stored *api.Rack
	tok := api.Token{User: by.User, Role: api.RoleRack, Token: raw}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		cur, err := racks.resolve(ctx, tx, id, true)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if !reclaim {
			if err := unclaimedRack(ctx, tx, by.User); err != nil {
				return err
			}
		}
		next := api.Rack{Uuid: id, Status: api.RackOnline}
		if cur.obj != nil {
			next = *cur.obj
			if next.Status != api.RackPaused {
				next.Status = api.RackOnline
			}
		}
		next.Name, next.Interfaces, next.Version = reg.Name, reg.Interfaces, reg.Version
		next.RegionEndpoints, next.LastSeen = endpoints, time.Now().UTC()
		if stored, err = racks.write(ctx, tx, by, cur.seq, cur, &next); err != nil {
			return err
		}
		user, err := json.Marshal(api.User{Name: by.User, Role: api.RoleRack, Created: time.Now().UTC()})
		if err != nil {
			return err
		}
		// Inserted directly: the name holds ":", which users created through the API may not
		// use (it marks Field:value keys), so no operator can create or impersonate it.
		if _, err := tx.Exec(ctx, `INSERT INTO users (name, role, doc) VALUES ($1, 'rack', $2)
			ON CONFLICT (name) DO NOTHING`, by.User, user); err != nil {
			return err
		}
		return insertToken(ctx, tx, by, &tok, 0)
	})
	if err != nil {
		return api.Rack{}, api.Token{}, err
	}
	deriveStatus(stored, time.Now())
	return *stored, tok, nil
}

// rackByUUID resolves a rack addressed by its UUID only (the rack API's {uuid}).
func rackByUUID(ctx context.Context, q querier, id string, lock bool) (row[api.Rack], error) {
	if err := canonUUID("rack", "Uuid", &id, false); err != nil {
		return row[api.Rack]{}, err
	}
	return racks.resolve(ctx, q, id, lock)
}

// RackHeartbeat records a heartbeat: LastSeen, Version, the rack's own view of its health
// and the region it talks to. It writes no audit event (racks beat every few seconds) and
// leaves a paused rack paused.
func (s *Store) RackHeartbeat(ctx context.Context, rackUUID string, hb api.RackHeartbeat) (api.Rack, error) {
	var rack api.Rack
	err := s.tx(ctx, func(tx pgx.Tx) error {
		r, err := rackByUUID(ctx, tx, rackUUID, true)
		if err != nil {
			return err
		}
		rack = *r.obj
		emptyMeta(&rack.Meta)
		rack.LastSeen = time.Now().UTC()
		if hb.Version != "" {
			rack.Version = hb.Version
		}
		if rack.Status != api.RackPaused {
			rack.Status = api.RackOnline
			if hb.Degraded {
				rack.Status = api.RackDegraded
			}
		}
		delete(rack.Meta, MetaStatusReason)
		if hb.Degraded && hb.Reason != "" {
			rack.Meta[MetaStatusReason] = hb.Reason
		}
		delete(rack.Meta, MetaCurrentRegion)
		if hb.CurrentRegion != "" {
			rack.Meta[MetaCurrentRegion] = hb.CurrentRegion
		}
		doc, err := json.Marshal(rack)
		if err != nil {
			return fmt.Errorf("encode rack: %w", err)
		}
		_, err = tx.Exec(ctx, "UPDATE racks SET doc = $1 WHERE seq = $2", doc, r.seq)
		return err
	})
	if err != nil {
		return api.Rack{}, err
	}
	deriveStatus(&rack, time.Now())
	return rack, nil
}

// RackConfigRevision is the region's revision of what racks serve (the rack_config_revision
// row, which triggers bump once per transaction that changes any rack's config).
type RackConfigRevision struct {
	Revision int64 // bumped by every change of a rack config
	Static   int64 // the last revision that changed more than leases
}

// RackConfigRevision reads the current revision.
func (s *Store) RackConfigRevision(ctx context.Context) (RackConfigRevision, error) {
	return configRevision(ctx, s.pool)
}

func configRevision(ctx context.Context, q querier) (RackConfigRevision, error) {
	var rev RackConfigRevision
	err := q.QueryRow(ctx, "SELECT revision, static_revision FROM rack_config_revision").Scan(&rev.Revision, &rev.Static)
	return rev, classify(err)
}

// RackConfig returns what the rack serves and the revision it is of, read in one consistent
// snapshot: the VLANs with DHCPOn it is primary or secondary rack of, their subnets, a
// reservation for every machine with a MAC and an Address in those subnets (its first MAC),
// the active leases of other racks there (ConfigLeases), and the proxy settings. Config.Rack leaves out LastSeen,
// Status, the heartbeat's Meta keys, which change with heartbeats, and a transfer's hold, so
// that the config (and its ETag) changes only when what the rack serves changes.
func (s *Store) RackConfig(ctx context.Context, rackUUID string) (api.RackConfig, RackConfigRevision, error) {
	cfg := api.RackConfig{VLANs: []api.VLAN{}, Subnets: []api.Subnet{}, Reservations: []api.Reservation{}}
	var rev RackConfigRevision
	if err := s.compactDNSChanges(ctx, dnsCompactAfter); err != nil {
		return api.RackConfig{}, rev, err
	}
	err := s.snapshot(ctx, func(tx pgx.Tx) error {
		var err error
		if rev, err = configRevision(ctx, tx); err != nil {
			return err
		}
		r, err := rackByUUID(ctx, tx, rackUUID, false)
		if err != nil {
			return err
		}
		cfg.Rack = *r.obj
		cfg.Rack.LastSeen, cfg.Rack.Status = time.Time{}, ""
		delete(cfg.Rack.Meta, MetaStatusReason)
		delete(cfg.Rack.Meta, MetaCurrentRegion)
		api.RackHold{}.Record(cfg.Rack.Meta) // a transfer's hold changes nothing the rack serves

		served := &where{}
		served.add("(primary_rack = $1 OR secondary_rack = $1) AND (doc->>'DHCPOn')::boolean", cfg.Rack.Uuid)
		vlanRows, err := vlans.selectRows(ctx, tx, served, "")
		if err != nil {
			return err
		}
		vlanIDs := make([]string, len(vlanRows))
		for i, v := range vlanRows {
			cfg.VLANs = append(cfg.VLANs, *v.obj)
			vlanIDs[i] = v.obj.Uuid
		}

		onVLANs := &where{}
		onVLANs.add("vlan = ANY($1::uuid[])", vlanIDs)
		subnetRows, err := subnets.selectRows(ctx, tx, onVLANs, "")
		if err != nil {
			return err
		}
		subnetIDs := make([]string, len(subnetRows))
		for i, sn := range subnetRows {
			cfg.Subnets = append(cfg.Subnets, *sn.obj)
			subnetIDs[i] = sn.obj.Uuid
		}

		if cfg.Reservations, err = reservations(ctx, tx, subnetIDs); err != nil {
			return err
		}
		if cfg.Leases, err = othersLeases(ctx, tx, cfg.Rack.Uuid, subnetIDs); err != nil {
			return err
		}
		if cfg.DNS, err = rackDNS(ctx, tx); err != nil {
			return err
		}
		cfg.Proxy, err = proxySettings(ctx, tx)
		return err
	})
	if err != nil {
		return api.RackConfig{}, RackConfigRevision{}, err
	}
	return cfg, rev, nil
}

// ConfigLeases returns the sections of a rack's config that change without a static
// revision, and the revision they are of: the active, unexpired leases in subnets that another
// rack (or no rack) granted, and the DNS section, whose serial moves with every change the
// zones show (a lease, a record, a migration). The rack's own leases are left out: it holds
// them already, and its uploads must not change its own config.
func (s *Store) ConfigLeases(ctx context.Context, rackUUID string, subnetIDs []string) ([]api.Lease, api.RackDNS, RackConfigRevision, error) {
	var out []api.Lease
	var dns api.RackDNS
	var rev RackConfigRevision
	if err := s.compactDNSChanges(ctx, dnsCompactAfter); err != nil {
		return nil, dns, rev, err
	}
	err := s.snapshot(ctx, func(tx pgx.Tx) error {
		var err error
		if rev, err = configRevision(ctx, tx); err != nil {
			return err
		}
		if out, err = othersLeases(ctx, tx, rackUUID, subnetIDs); err != nil {
			return err
		}
		dns, err = rackDNS(ctx, tx)
		return err
	})
	return out, dns, rev, err
}

// snapshot runs fn in a read-only transaction that sees one consistent state.
func (s *Store) snapshot(ctx context.Context, fn func(pgx.Tx) error) error {
	return classify(pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn))
}

func othersLeases(ctx context.Context, tx pgx.Tx, rackUUID string, subnetIDs []string) ([]api.Lease, error) {
	activeIn := &where{}
	activeIn.add("subnet = ANY($1::uuid[]) AND doc->>'State' = 'active'", subnetIDs)
	activeIn.add("doc->>'Rack' IS DISTINCT FROM $1", rackUUID)
	leaseRows, err := leases.selectRows(ctx, tx, activeIn, "")
	if err != nil {
		return nil, err
	}
	out := []api.Lease{}
	now := time.Now()
	for _, l := range leaseRows {
		if l.obj.Expires.After(now) {
			out = append(out, *l.obj)
		}
	}
	return out, nil
}

// reservations lists the fixed addresses of machines in the given subnets.
func reservations(ctx context.Context, tx pgx.Tx, subnetIDs []string) ([]api.Reservation, error) {
	rows, err := tx.Query(ctx, `SELECT s.uuid::text, m.doc FROM machines m
		JOIN subnets s ON NULLIF(m.doc->>'Address', '')::inet << s.cidr
		WHERE s.uuid = ANY($1::uuid[]) AND jsonb_array_length(m.doc->'HardwareAddrs') > 0
		ORDER BY m.name, m.seq`, subnetIDs)
	if err != nil {
		return nil, err
	}
	out := []api.Reservation{}
	for rows.Next() {
		var subnet string
		var doc []byte
		if err := rows.Scan(&subnet, &doc); err != nil {
			rows.Close()
			return nil, err
		}
		m, err := decode[api.Machine](doc)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("stored machine: %w", err)
		}
		out = append(out, api.Reservation{MAC: m.HardwareAddrs[0], Addr: m.Address, Hostname: m.Name,
			Machine: m.Uuid, Subnet: subnet, BootEnv: m.BootEnv})
	}
	return out, rows.Err()
}

// subnetCIDRs maps the subnets the leases name, where they exist, to their networks.
func subnetCIDRs(ctx context.Context, tx pgx.Tx, ls []api.Lease) (map[string]netip.Prefix, error) {
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = l.Subnet
	}
	return subnetPrefixes(ctx, tx, "SELECT uuid::text, cidr FROM subnets WHERE uuid = ANY($1::uuid[])", ids)
}

// subnetPrefixes maps the (uuid, cidr) rows query selects to subnet UUID → network.
func subnetPrefixes(ctx context.Context, tx pgx.Tx, query string, args ...any) (map[string]netip.Prefix, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	out := map[string]netip.Prefix{}
	for rows.Next() {
		var id string
		var cidr netip.Prefix
		if err := rows.Scan(&id, &cidr); err != nil {
			rows.Close()
			return nil, err
		}
		out[id] = cidr
	}
	return out, rows.Err()
}
