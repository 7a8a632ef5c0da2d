// Package store keeps the region's state in PostgreSQL: typed key and relation columns for
// constraints, plus a jsonb doc holding the exact api object (so JSON round-trips unchanged).
//
// Each kind is a descriptor (kind.go) of table, identity, key columns, validation and
// relation tables; the CRUD, key resolution, filters, error translation and audit events are
// shared. Keys are a UUID (or a Name for profiles, pools and users) or Field:value; filters
// match top-level JSON fields exactly, and a list field when it contains the value.
// Schema changes are new files in migrations/, applied in order at Open.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironflow/ironflow/region/api"
)

// Store is the region's PostgreSQL store.
type Store struct {
	pool *pgxpool.Pool
}

// Principal is who makes a call; the store records it as the Actor of audit events.
type Principal struct{ User, Role string }

// ListOptions filters and pages List and Events.
type ListOptions struct {
	Filters map[string]string
	Offset  int
	Limit   int // 0 = no limit
}

// Open connects (pgxpool), applies the embedded versioned SQL migrations under a
// pg_advisory_lock (several region processes may start at once) and returns the store.
// It succeeds only when the database is reachable; afterwards pgxpool reconnects by itself.
func Open(ctx context.Context, databaseURL string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, invalidf("database URL: %v", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, classify(fmt.Errorf("connect to PostgreSQL: %w", err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, classify(fmt.Errorf("connect to PostgreSQL at %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err))
	}
	if err := migrateSchema(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{pool: pool}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that PostgreSQL answers.
func (s *Store) Ping(ctx context.Context) error {
	return classify(s.pool.Ping(ctx))
}

// kinds maps the names of region/api.Kinds to their descriptors (TestStoreHasEveryKind).
var kinds = map[string]kindOps{
	api.KindMachines:             machines,
	api.KindJobs:                 jobs,
	api.KindProfiles:             profiles,
	api.KindPools:                pools,
	api.KindPods:                 pods,
	api.KindFabrics:              fabrics,
	api.KindVLANs:                vlans,
	api.KindSubnets:              subnets,
	api.KindLeases:               leases,
	api.KindRacks:                rackStatusView{racks}, // reads derive Status from heartbeats
	api.KindUsers:                users,
	api.KindTasks:                tasks,
	api.KindDomains:              domains,
	api.KindDNSRecords:           dnsRecords,
	api.KindCommissioningScripts: commissioningScripts,
}

func lookup(kind string) (kindOps, error) {
	k, ok := kinds[kind]
	if !ok {
		return nil, notFoundf("there are no %q objects", kind)
	}
	return k, nil
}

// Create fills Uuid when the kind has one and it is empty, calls Normalize where the type has
// it, validates, inserts, and writes an audit event in the same transaction; on return obj
// holds the stored object.
func (s *Store) Create(ctx context.Context, by Principal, kind string, obj any) error {
	k, err := lookup(kind)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error { return k.create(ctx, tx, by, obj) })
}

// Get resolves key: a UUID; a Name for profiles, pools and users; or "Field:value".
func (s *Store) Get(ctx context.Context, kind, key string, out any) error {
	k, err := lookup(kind)
	if err != nil {
		return err
	}
	return classify(k.get(ctx, s.pool, key, out))
}

// List filters on top-level JSON fields (exact match; a list field matches when it contains
// the value) and orders by Name, or by creation for kinds without one (jobs: StartTime, Uuid).
func (s *Store) List(ctx context.Context, kind string, opts ListOptions, out any) error {
	k, err := lookup(kind)
	if err != nil {
		return err
	}
	return classify(k.list(ctx, s.pool, opts, out))
}

// Replace stores obj as the new state of the object at key (PUT).
func (s *Store) Replace(ctx context.Context, by Principal, kind, key string, obj any) error {
	k, err := lookup(kind)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error { return k.replace(ctx, tx, by, key, obj) })
}

// Delete removes the object at key; dependents make it ErrInUse (*DependencyError).
func (s *Store) Delete(ctx context.Context, by Principal, kind, key string, force bool) error {
	k, err := lookup(kind)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error { return k.remove(ctx, tx, by, key, force) })
}

// tx runs fn in a transaction and turns constraint violations into classed errors.
// Under DryRun it rolls back what fn did and returns ErrDryRun.
func (s *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	rp := replayOf(ctx)
	switch {
	case isDryRun(ctx):
		inner := fn
		fn = func(tx pgx.Tx) error {
			if err := inner(tx); err != nil {
				return err
			}
			return ErrDryRun
		}
	case rp != nil && !rp.Applied:
		inner := fn
		fn = func(tx pgx.Tx) error {
			if err := rp.checkBase(ctx, tx); err != nil {
				return err
			}
			if err := inner(tx); err != nil {
				return err
			}
			return rp.settle(ctx, tx)
		}
	}
	err := pgx.BeginFunc(ctx, s.pool, fn)
	if rp != nil && err == nil {
		rp.Applied = true
	}
	if err == nil || errors.Is(err, ErrDryRun) || errors.Is(err, ErrReplayed) {
		return err
	}
	pgErr := pgError(err)
	if pgErr == nil {
		return classify(err)
	}
	switch pgErr.Code {
	case errUniqueViolate:
		return s.conflict(ctx, pgErr)
	case errForeignKey:
		return missingReferent(pgErr)
	case errCheck, errBadText:
		return invalidf("%s", pgErr.Message)
	}
	return classify(err)
}

// uniqueKey explains a unique constraint: which field of which kind clashed, and a query
// that describes the object already holding the value.
type uniqueKey struct {
	noun, field string
	owner       string // SQL on $1 (the clashing value) returning a description; may be ""
	message     func(value, owner string) string
}

var uniqueKeys = map[string]uniqueKey{
	"machines_pkey":     {noun: "machine", field: "Uuid", owner: "SELECT 'name ' || name FROM machines WHERE uuid = $1::uuid"},
	"machines_name_key": {noun: "machine", field: "Name", owner: "SELECT 'uuid ' || uuid FROM machines WHERE name = $1"},
	"machine_macs_pkey": {owner: "SELECT m.name FROM machine_macs mm JOIN machines m ON m.uuid = mm.machine WHERE mm.mac = $1",
		message: func(mac, owner string) string {
			if owner == "" { // the holder went away since the failed write
				return fmt.Sprintf("MAC %s is already in use", mac)
			}
			return fmt.Sprintf("MAC %s belongs to machine %s", mac, owner)
		}},
	"jobs_pkey":     {noun: "job", field: "Uuid"},
	"profiles_pkey": {noun: "profile", field: "Name"},
	"pools_pkey":    {noun: "pool", field: "Name"},
	"users_pkey":    {noun: "user", field: "Name"},
	"tasks_pkey":    {noun: "task", field: "Name"},
	"domains_pkey":  {noun: "domain", field: "Name"},
	"domains_one_default": {owner: "SELECT name FROM domains WHERE is_default AND $1::text IS NOT NULL", message: func(_, owner string) string {
		return fmt.Sprintf("domain %s is already the default: update it to Default false first", owner)
	}},
	"commissioning_scripts_pkey": {noun: "commissioning script", field: "Name"},
	"machine_identities_pkey": {owner: "SELECT m.name || ' (' || m.uuid || ')' FROM machine_identities mi JOIN machines m ON m.uuid = mi.machine WHERE mi.value = $1 LIMIT 1",
		message: func(identity, owner string) string {
			if owner == "" {
				return fmt.Sprintf("SMBIOS UUID, serial or BMC address %s is already in use", identity)
			}
			return fmt.Sprintf("SMBIOS UUID, serial or BMC address %s belongs to machine %s", identity, owner)
		}},
	"racks_pkey":             {noun: "rack", field: "Uuid", owner: "SELECT 'name ' || name FROM racks WHERE uuid = $1::uuid"},
	"racks_name_key":         {noun: "rack", field: "Name", owner: "SELECT 'uuid ' || uuid FROM racks WHERE name = $1"},
	"fabrics_pkey":           {noun: "fabric", field: "Uuid", owner: "SELECT 'name ' || name FROM fabrics WHERE uuid = $1::uuid"},
	"fabrics_name_key":       {noun: "fabric", field: "Name", owner: "SELECT 'uuid ' || uuid FROM fabrics WHERE name = $1"},
	"vlans_pkey":             {noun: "vlan", field: "Uuid"},
	"vlans_fabric_vid_key":   {noun: "vlan", field: "VID", message: func(vid, _ string) string { return fmt.Sprintf("vlan VID %s already exists on this fabric", vid) }},
	"subnets_pkey":           {noun: "subnet", field: "Uuid", owner: "SELECT 'CIDR ' || cidr FROM subnets WHERE uuid = $1::uuid"},
	"subnets_cidr_key":       {noun: "subnet", field: "CIDR", owner: "SELECT 'uuid ' || uuid || ', name ' || name FROM subnets WHERE cidr = $1::cidr"},
	"leases_subnet_addr_key": {noun: "lease", field: "Addr", message: func(addr, _ string) string { return fmt.Sprintf("lease Addr %s already exists in this subnet", addr) }},
	"pods_pkey":              {noun: "pod", field: "Uuid", owner: "SELECT 'name ' || name FROM pods WHERE uuid = $1::uuid"},
	"pods_name_key":          {noun: "pod", field: "Name", owner: "SELECT 'uuid ' || uuid FROM pods WHERE name = $1"},
}

// conflict describes a unique violation, looking up the current holder of the value (the
// failed transaction is gone, so this runs on the pool).
func (s *Store) conflict(ctx context.Context, pgErr *pgconn.PgError) error {
	value := detailValue(pgErr)
	u, ok := uniqueKeys[pgErr.ConstraintName]
	if !ok {
		return conflictf("%s already exists (%s)", value, pgErr.ConstraintName)
	}
	owner := ""
	if u.owner != "" {
		if err := s.pool.QueryRow(ctx, u.owner, value).Scan(&owner); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return classify(fmt.Errorf("describe conflict on %s: %w", pgErr.ConstraintName, err))
		}
	}
	if u.message != nil {
		return conflictf("%s", u.message(value, owner))
	}
	msg := fmt.Sprintf("%s %s %q already exists", u.noun, u.field, value)
	if owner != "" {
		msg += " (" + owner + ")"
	}
	return conflictf("%s", msg)
}
