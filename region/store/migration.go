package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/tickets"
)

// The region side of a machine migration (region/api/migration.go). The source region keeps a
// snapshot of the machine and its jobs from quiesce on; export, unquiesce and restore read it,
// and it goes when the machine is deleted or unquiesced.

// agentMetaKeys are what the agent reports; they stay current through quiesce and unquiesce.
var agentMetaKeys = []string{api.MetaAgentLastSeen, api.MetaAgentEndpoint, api.MetaAgentVersion}

// metaFeatureFlags is the one Meta key a migrated stub keeps, as in the seed.
const metaFeatureFlags = "feature-flags"

// TicketKey returns the region cluster's ticket signing key, minting it on first use;
// concurrent first calls of several region processes agree on one key.
func (s *Store) TicketKey(ctx context.Context) ([]byte, error) {
	fresh, err := tickets.NewKey()
	if err != nil {
		return nil, err
	}
	// Two statements: the SELECT then sees a key a concurrent first call committed while
	// this INSERT waited for it.
	if _, err := s.pool.Exec(ctx, "INSERT INTO ticket_key (key) VALUES ($1) ON CONFLICT (singleton) DO NOTHING", fresh); err != nil {
		return nil, classify(fmt.Errorf("store ticket key: %w", err))
	}
	var key []byte
	if err := s.pool.QueryRow(ctx, "SELECT key FROM ticket_key").Scan(&key); err != nil {
		return nil, classify(fmt.Errorf("read ticket key: %w", err))
	}
	return key, nil
}

// TicketUse is a ticket whose signature, region, scope and expiry the caller has verified.
type TicketUse struct {
	ID      string
	Expires time.Time
	// Migration is the workflow ID the importer says the import belongs to ("" when it does
	// not say): it holds the inactive copy until the import completes (holds.go).
	Migration string
	StartedBy string // who started the move, for the import's audit event
}

// snapshot is a machine and its jobs as they were before a migration quiesced the machine.
type snapshot struct {
	migration string
	machine   api.Machine
	jobs      []api.Job
}

// loadSnapshot returns the snapshot of machine, or nil when it has none.
func loadSnapshot(ctx context.Context, q querier, machine string, lock bool) (*snapshot, error) {
	sql := "SELECT migration, doc, jobs FROM migration_snapshots WHERE machine = $1::uuid"
	if lock {
		sql += " FOR UPDATE"
	}
	var snap snapshot
	var doc, jobsDoc []byte
	err := q.QueryRow(ctx, sql, machine).Scan(&snap.migration, &doc, &jobsDoc)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	}
	if err := json.Unmarshal(doc, &snap.machine); err != nil {
		return nil, fmt.Errorf("stored snapshot of machine %s: %w", machine, err)
	}
	if err := json.Unmarshal(jobsDoc, &snap.jobs); err != nil {
		return nil, fmt.Errorf("stored snapshot of the jobs of machine %s: %w", machine, err)
	}
	return &snap, nil
}

func saveSnapshot(ctx context.Context, tx pgx.Tx, snap *snapshot) error {
	_, err := tx.Exec(ctx, `INSERT INTO migration_snapshots (machine, migration, doc, jobs) VALUES ($1, $2, $3, $4)
		ON CONFLICT (machine) DO UPDATE SET migration = excluded.migration, doc = excluded.doc, jobs = excluded.jobs, taken_at = now()`,
		snap.machine.Uuid, snap.migration, snap.machine, snap.jobs)
	return err
}

// live is the machine cur as it would be without the migration: a stub's snapshot, or cur
// with the Runnable and Meta it had before quiesce plus what its agent reported since.
func (snap *snapshot) live(cur *api.Machine) (*api.Machine, error) {
	if isStub(cur) {
		return clone(&snap.machine)
	}
	m, err := clone(cur)
	if err != nil {
		return nil, err
	}
	m.Runnable = snap.machine.Runnable
	m.Meta = maps.Clone(snap.machine.Meta)
	emptyMeta(&m.Meta)
	for _, k := range agentMetaKeys {
		if v, ok := cur.Meta[k]; ok {
			m.Meta[k] = v
		}
	}
	return m, nil
}

// isStub reports a machine that migrated away and now only redirects.
func isStub(m *api.Machine) bool { return m.Meta[api.MetaRedirectEndpoint] != "" }

// machineJobs returns the jobs of a machine in List order.
func machineJobs(ctx context.Context, q querier, machine string, lock bool) ([]row[api.Job], error) {
	w := &where{}
	w.add("machine = $1::uuid", machine)
	suffix := ""
	if lock {
		suffix = " FOR UPDATE"
	}
	return jobs.selectRows(ctx, q, w, suffix)
}

func jobObjects(rows []row[api.Job]) []api.Job {
	out := make([]api.Job, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r.obj)
	}
	return out
}

// updateMachine stores m as the new state of the machine row r.
func updateMachine(ctx context.Context, tx pgx.Tx, by Principal, r row[api.Machine], m *api.Machine) (*api.Machine, error) {
	m.Normalize()
	return machines.write(ctx, tx, by, r.seq, r, m)
}

// updateJob stores j as the new state of the job row r.
func updateJob(ctx context.Context, tx pgx.Tx, by Principal, r row[api.Job], j *api.Job) (*api.Job, error) {
	j.Normalize()
	return jobs.write(ctx, tx, by, r.seq, r, j)
}

// machineOp runs fn on the locked machine at key in a transaction and returns what fn stored
// (or the machine unchanged when fn returns nil).
func (s *Store) machineOp(ctx context.Context, key string, fn func(tx pgx.Tx, r row[api.Machine]) (*api.Machine, error)) (api.Machine, error) {
	var out *api.Machine
	err := s.tx(ctx, func(tx pgx.Tx) error {
		r, err := machines.resolve(ctx, tx, key, true)
		if err != nil {
			return err
		}
		if out, err = fn(tx, r); err != nil {
			return err
		}
		if out == nil {
			out = r.obj
		}
		return nil
	})
	if err != nil {
		return api.Machine{}, err
	}
	return *out, nil
}

// Quiesce stops new work on a machine for the migration (a workflow ID): it saves the machine
// and its jobs as they are, then sets Runnable=false and Meta.migrating. Quiescing again for
// the same migration changes nothing; another migration is ErrConflict, as is a migrated stub;
// a machine in WorkOrderMode is ErrInvalid.
func (s *Store) Quiesce(ctx context.Context, by Principal, key, migration string) (api.Machine, error) {
	if strings.TrimSpace(migration) == "" {
		return api.Machine{}, invalidf("quiesce needs the migration that holds the machine")
	}
	return s.machineOp(ctx, key, func(tx pgx.Tx, r row[api.Machine]) (*api.Machine, error) {
		m := r.obj
		held := m.Meta[api.MetaMigrating]
		switch {
		case isStub(m):
			return nil, conflictf("machine %s (%s) was already migrated to %s", m.Name, m.Uuid, m.Meta[api.MetaRedirectEndpoint])
		case held != "" && held != migration:
			return nil, conflictf("machine %s (%s) is already being migrated by %s", m.Name, m.Uuid, held)
		case held == "" && m.WorkOrderMode:
			return nil, invalidf("machine %s (%s) has WorkOrderMode set; turn it off to migrate", m.Name, m.Uuid)
		}
		if err := fence(ctx, tx, m.Uuid, m.Name, migration); err != nil {
			return nil, err
		}
		if held == migration {
			return nil, nil
		}
		js, err := machineJobs(ctx, tx, m.Uuid, true)
		if err != nil {
			return nil, err
		}
		if err := saveSnapshot(ctx, tx, &snapshot{migration: migration, machine: *m, jobs: jobObjects(js)}); err != nil {
			return nil, err
		}
		q, err := clone(m)
		if err != nil {
			return nil, err
		}
		q.Runnable = false
		emptyMeta(&q.Meta)
		q.Meta[api.MetaMigrating] = migration
		stored, err := updateMachine(ctx, tx, by, r, q)
		if err != nil {
			return nil, err
		}
		return stored, recordEvent(ctx, tx, by, "quiesce", api.KindMachines, m.Uuid, map[string]any{"Migration": migration})
	})
}

// refuseOtherMigration refuses a step made for a migration (ForMigration) on a machine
// another migration holds: a retried step of one move must not act on what another move
// holds (e.g. activate its copy, whose undo that move would then be refused). A step naming
// no migration is an operator's, and is not refused. A step of an attempt older than one that
// acted on the machine is refused too (fence).
func refuseOtherMigration(ctx context.Context, q querier, m *api.Machine) error {
	acting := actingFor(ctx)
	if acting == "" {
		return nil
	}
	held, err := holder(ctx, q, m)
	if err != nil {
		return err
	}
	if held != "" && held != acting {
		return conflictf("machine %s (%s) is held by migration %s; migration %s may not act on it", m.Name, m.Uuid, held, acting)
	}
	return fence(ctx, q, m.Uuid, m.Name, acting)
}

// Unquiesce gives the machine back the Runnable and Meta of its snapshot and drops the
// snapshot. Without a snapshot it returns the machine unchanged; a stub must be restored first.
func (s *Store) Unquiesce(ctx context.Context, by Principal, key string) (api.Machine, error) {
	return s.machineOp(ctx, key, func(tx pgx.Tx, r row[api.Machine]) (*api.Machine, error) {
		if err := refuseOtherMigration(ctx, tx, r.obj); err != nil {
			return nil, err
		}
		snap, err := loadSnapshot(ctx, tx, r.obj.Uuid, true)
		if err != nil || snap == nil {
			return nil, err
		}
		if isStub(r.obj) {
			return nil, conflictf("machine %s (%s) is a stub migrated to %s; restore the migration before unquiescing", r.obj.Name, r.obj.Uuid, r.obj.Meta[api.MetaRedirectEndpoint])
		}
		m, err := snap.live(r.obj)
		if err != nil {
			return nil, err
		}
		stored, err := updateMachine(ctx, tx, by, r, m)
		if err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM migration_snapshots WHERE machine = $1::uuid", r.obj.Uuid); err != nil {
			return nil, err
		}
		return stored, recordEvent(ctx, tx, by, "unquiesce", api.KindMachines, r.obj.Uuid, map[string]any{"Migration": snap.migration})
	})
}

// Export returns what moves with the machine at key: the machine as it was before quiesce,
// its jobs with their logs, the profiles it uses, directly or through other profiles, and
// its newest syslog messages (syslog_moves.go).
func (s *Store) Export(ctx context.Context, key string) (api.Bundle, error) {
	var b api.Bundle
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := pgx.BeginTxFunc(ctx, s.pool, opts, func(tx pgx.Tx) error {
		r, err := machines.resolve(ctx, tx, key, false)
		if err != nil {
			return err
		}
		snap, err := loadSnapshot(ctx, tx, r.obj.Uuid, false)
		if err != nil {
			return err
		}
		m := r.obj
		switch {
		case snap != nil:
			if m, err = snap.live(r.obj); err != nil {
				return err
			}
		case isStub(m):
			return conflictf("machine %s (%s) is a stub migrated to %s; there is nothing to export", m.Name, m.Uuid, m.Meta[api.MetaRedirectEndpoint])
		}
		var js []api.Job
		if snap != nil && isStub(r.obj) {
			js = snap.jobs // the stub's own jobs were rewritten by finalize
		} else {
			rows, err := machineJobs(ctx, tx, m.Uuid, false)
			if err != nil {
				return err
			}
			js = jobObjects(rows)
		}
		logs, err := jobLogs(ctx, tx, js)
		if err != nil {
			return err
		}
		profs, err := usedProfiles(ctx, tx, m.Profiles)
		if err != nil {
			return err
		}
		sys, err := movedSyslog(ctx, tx, m.Uuid)
		if err != nil {
			return err
		}
		b = api.Bundle{Machine: *m, Jobs: js, JobLogs: logs, Profiles: profs, Syslog: sys}
		return nil
	})
	if err != nil {
		return api.Bundle{}, classify(err)
	}
	return b, nil
}

func jobLogs(ctx context.Context, q querier, js []api.Job) (map[string]string, error) {
	ids := make([]string, 0, len(js))
	for _, j := range js {
		ids = append(ids, j.Uuid)
	}
	rows, err := q.Query(ctx, "SELECT job::text, text FROM job_logs WHERE job = ANY($1::uuid[])", ids)
	if err != nil {
		return nil, err
	}
	logs := map[string]string{}
	var job, text string
	_, err = pgx.ForEachRow(rows, []any{&job, &text}, func() error {
		logs[job] = text
		return nil
	})
	return logs, err
}

// usedProfiles returns the named profiles and every profile they include, by name.
func usedProfiles(ctx context.Context, q querier, names []string) ([]api.Profile, error) {
	w := &where{}
	w.add(`name IN (WITH RECURSIVE reach(name) AS (
			SELECT unnest($1::text[])
			UNION SELECT pp.uses FROM profile_profiles pp JOIN reach r ON pp.profile = r.name)
		SELECT name FROM reach)`, names)
	rows, err := profiles.selectRows(ctx, q, w, "")
	if err != nil {
		return nil, err
	}
	out := make([]api.Profile, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r.obj)
	}
	return out, nil
}

// Import stores a bundle exported by another region, in one transaction: it spends the
// ticket, creates the profiles this region lacks (its own win on a name clash) and the pool,
// and inserts the machine inactive (Runnable and Available false) with its jobs and logs,
// and the syslog messages of the bundle it does not hold for the machine yet.
// endpoint is this region's public URL, which the copy of the machine's current job records
// as Meta.redirect-endpoint, as in the seed.
//
// The machine may replace only a record of the same UUID that is a migrated stub or an
// inactive earlier import; another machine with its Name or a MAC is ErrConflict naming it.
// A ticket spent on this same machine before is accepted again while that import is in
// flight (the caller may have lost the answer): until the machine is activated here or its
// copy deleted, which closes the ticket. Any other reuse, and any use of a closed ticket, is
// ErrConflict. A failed import changes nothing.
func (s *Store) Import(ctx context.Context, ticket TicketUse, b api.Bundle, endpoint string) (api.Machine, error) {
	if err := validURL("region", "public URL", endpoint); err != nil {
		return api.Machine{}, err
	}
	m, js, logs, err := importedObjects(b, endpoint)
	if err != nil {
		return api.Machine{}, err
	}
	sys, err := importedSyslog(b.Syslog, m.Uuid)
	if err != nil {
		return api.Machine{}, err
	}
	by := Principal{User: "ticket:" + ticket.ID}
	var stored *api.Machine
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if err := fence(ctx, tx, m.Uuid, m.Name, ticket.Migration); err != nil {
			return err
		}
		reused, err := spendTicket(ctx, tx, ticket, m.Uuid)
		if err != nil {
			return err
		}
		if err := importConflicts(ctx, tx, m); err != nil {
			return err
		}
		if err := refuseMissingImages(ctx, tx, m); err != nil {
			return err
		}
		if err := ensurePool(ctx, tx, by, m.Pool); err != nil {
			return err
		}
		created, err := importProfiles(ctx, tx, by, b.Profiles)
		if err != nil {
			return err
		}
		if stored, err = importMachine(ctx, tx, by, ticket.ID, reused, m); err != nil {
			return err
		}
		// A machine coming back over its stub leaves behind the snapshot of its earlier
		// departure; an unquiesce must never restore that stale state.
		if _, err := tx.Exec(ctx, "DELETE FROM migration_snapshots WHERE machine = $1::uuid", m.Uuid); err != nil {
			return err
		}
		for _, j := range js {
			if err := upsertJob(ctx, tx, by, j); err != nil {
				return err
			}
		}
		for job, text := range logs {
			if _, err := tx.Exec(ctx, `INSERT INTO job_logs (job, text) VALUES ($1, $2)
				ON CONFLICT (job) DO UPDATE SET text = excluded.text`, job, text); err != nil {
				return err
			}
		}
		syslogStored, err := insertMovedSyslog(ctx, tx, m.Uuid, ticket.ID, sys)
		if err != nil {
			return err
		}
		return recordEvent(ctx, tx, by, "import", api.KindMachines, m.Uuid,
			map[string]any{"Ticket": ticket.ID, "Jobs": len(js), "ProfilesCreated": created, "Migration": ticket.Migration, "StartedBy": ticket.StartedBy,
				"Syslog": syslogStored})
	})
	if err != nil {
		return api.Machine{}, err
	}
	return *stored, nil
}

// importedObjects checks a bundle and returns its machine, jobs and logs as this region
// stores them.
func importedObjects(b api.Bundle, endpoint string) (*api.Machine, []*api.Job, map[string]string, error) {
	m, err := clone(&b.Machine)
	if err != nil {
		return nil, nil, nil, err
	}
	m.Normalize()
	if err := canonUUID("imported machine", "Uuid", &m.Uuid, false); err != nil {
		return nil, nil, nil, err
	}
	if err := canonUUID("imported machine", "CurrentJob", &m.CurrentJob, true); err != nil {
		return nil, nil, nil, err
	}
	if err := canonMACs("imported machine "+m.Name, "HardwareAddrs", m.HardwareAddrs); err != nil {
		return nil, nil, nil, err
	}
	if isStub(m) {
		return nil, nil, nil, invalidf("the bundle's machine %s (%s) is a stub migrated to %s", m.Name, m.Uuid, m.Meta[api.MetaRedirectEndpoint])
	}
	delete(m.Meta, api.MetaMigrating)
	m.Runnable, m.Available = false, false

	ids := map[string]bool{}
	js := make([]*api.Job, 0, len(b.Jobs))
	for i := range b.Jobs {
		j, err := clone(&b.Jobs[i])
		if err != nil {
			return nil, nil, nil, err
		}
		j.Normalize()
		if err := canonUUID("imported job", "Uuid", &j.Uuid, false); err != nil {
			return nil, nil, nil, err
		}
		if err := canonUUID("imported job "+j.Uuid, "Machine", &j.Machine, false); err != nil {
			return nil, nil, nil, err
		}
		if j.Machine != m.Uuid {
			return nil, nil, nil, invalidf("the bundle's job %s belongs to machine %s, not to %s", j.Uuid, j.Machine, m.Uuid)
		}
		if j.Uuid == m.CurrentJob {
			j.Meta[api.MetaRedirectEndpoint] = endpoint
		}
		ids[j.Uuid] = true
		js = append(js, j)
	}
	logs := map[string]string{}
	for job, text := range b.JobLogs {
		id := job
		if err := canonUUID("imported job log", "job", &id, false); err != nil || !ids[id] {
			return nil, nil, nil, invalidf("the bundle has a log for %q, which is not one of its jobs", job)
		}
		if i := strings.IndexByte(text, 0); i >= 0 {
			return nil, nil, nil, invalidf("the bundle's log of job %s contains a NUL byte at offset %d", id, i)
		}
		logs[id] = text
	}
	return m, js, logs, nil
}

// spendTicket records that ticket imports machine. reused reports a ticket spent on this
// same machine before.
func spendTicket(ctx context.Context, tx pgx.Tx, t TicketUse, machine string) (reused bool, err error) {
	if t.ID == "" {
		return false, invalidf("ticket has no ID")
	}
	tag, err := tx.Exec(ctx, `INSERT INTO tickets (jti, expires_at, used_at, machine, migration) VALUES ($1, $2, now(), $3, nullif($4, ''))
		ON CONFLICT (jti) DO UPDATE SET used_at = now(), machine = excluded.machine, migration = excluded.migration WHERE tickets.used_at IS NULL`,
		t.ID, t.Expires, machine, t.Migration)
	if err != nil {
		return false, err
	}
	if tag.RowsAffected() == 1 {
		return false, nil
	}
	var usedAt time.Time
	var closedAt *time.Time
	var usedFor *string
	if err := tx.QueryRow(ctx, "SELECT used_at, closed_at, machine::text FROM tickets WHERE jti = $1 FOR UPDATE", t.ID).Scan(&usedAt, &closedAt, &usedFor); err != nil {
		return false, err
	}
	if closedAt != nil {
		return false, conflictf("ticket %s was spent at %s on an import that completed at %s; a ticket imports once",
			t.ID, usedAt.UTC().Format(time.RFC3339), closedAt.UTC().Format(time.RFC3339))
	}
	if usedFor != nil && *usedFor == machine {
		return true, nil
	}
	what := "another import"
	if usedFor != nil {
		what = "the import of machine " + *usedFor
	}
	return false, conflictf("ticket %s was already used at %s for %s", t.ID, usedAt.UTC().Format(time.RFC3339), what)
}

// importConflicts refuses other machines that hold m's Name or one of its MACs.
func importConflicts(ctx context.Context, tx pgx.Tx, m *api.Machine) error {
	clashes, err := queryStrings(ctx, tx, `
		SELECT 'Name ' || name || ' is used by machine ' || uuid FROM machines WHERE name = $1 AND uuid <> $2::uuid
		UNION ALL
		SELECT 'MAC ' || mm.mac || ' is used by machine ' || m.name || ' (' || m.uuid || ')'
			FROM machine_macs mm JOIN machines m ON m.uuid = mm.machine WHERE mm.mac = ANY($3::text[]) AND mm.machine <> $2::uuid
		ORDER BY 1`, m.Name, m.Uuid, m.HardwareAddrs)
	if err != nil {
		return err
	}
	if len(clashes) > 0 {
		return conflictf("cannot import machine %s (%s): %s", m.Name, m.Uuid, strings.Join(clashes, "; "))
	}
	return nil
}

// ensurePool creates the machine's pool when this region lacks it.
func ensurePool(ctx context.Context, tx pgx.Tx, by Principal, name string) error {
	if name == "" {
		return nil
	}
	_, err := pools.resolve(ctx, tx, name, false)
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	// Concurrent imports may create the same pool: the loser rolls back to a savepoint and
	// uses the winner's.
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	err = pools.create(ctx, sp, by, &api.Pool{Name: name, Meta: map[string]string{}})
	if pe := pgError(err); pe != nil && pe.Code == "23505" {
		return sp.Rollback(ctx)
	}
	if err != nil {
		_ = sp.Rollback(ctx)
		return err
	}
	return sp.Commit(ctx)
}

// importProfiles creates the bundle's profiles this region lacks, included ones first, and
// returns their names; a profile this region has already is kept as it is.
func importProfiles(ctx context.Context, tx pgx.Tx, by Principal, list []api.Profile) ([]string, error) {
	byName := map[string]api.Profile{}
	for _, p := range list {
		byName[p.Name] = p
	}
	var order []string
	visiting := map[string]bool{}
	var visit func(name string)
	visit = func(name string) {
		if _, seen := visiting[name]; seen {
			return
		}
		visiting[name] = true
		for _, inc := range byName[name].Profiles {
			if _, ok := byName[inc]; ok {
				visit(inc)
			}
		}
		order = append(order, name)
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		visit(name)
	}
	created := []string{}
	for _, name := range order {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM profiles WHERE name = $1)", name).Scan(&exists); err != nil {
			return nil, err
		}
		if exists {
			continue
		}
		p := byName[name]
		if err := profiles.create(ctx, tx, by, &p); err != nil {
			return nil, err
		}
		created = append(created, name)
	}
	return created, nil
}

// importMachine inserts m, or replaces the record with its UUID when that is a stub or an
// inactive earlier import.
func importMachine(ctx context.Context, tx pgx.Tx, by Principal, ticket string, reused bool, m *api.Machine) (*api.Machine, error) {
	r, err := machines.resolve(ctx, tx, m.Uuid, true)
	if errors.Is(err, ErrNotFound) {
		if err := machines.create(ctx, tx, by, m); err != nil {
			return nil, err
		}
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	if !isStub(r.obj) || !r.obj.Locked {
		earlier := reused
		if !earlier && !r.obj.Runnable {
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM tickets WHERE machine = $1::uuid AND jti <> $2 AND closed_at IS NULL)", m.Uuid, ticket).Scan(&earlier); err != nil {
				return nil, err
			}
		}
		if !earlier || r.obj.Runnable {
			return nil, conflictf("machine %s (%s) already exists on this region and is neither a migrated stub nor an inactive earlier import", r.obj.Name, r.obj.Uuid)
		}
	}
	return updateMachine(ctx, tx, by, r, m)
}

// upsertJob inserts j or replaces the job with its UUID, which must belong to the same machine.
func upsertJob(ctx context.Context, tx pgx.Tx, by Principal, j *api.Job) error {
	r, err := jobs.resolve(ctx, tx, j.Uuid, true)
	switch {
	case errors.Is(err, ErrNotFound):
		return jobs.create(ctx, tx, by, j)
	case err != nil:
		return err
	case r.obj.Machine != j.Machine:
		return conflictf("job %s belongs to machine %s on this region, not to %s", j.Uuid, r.obj.Machine, j.Machine)
	}
	_, err = updateJob(ctx, tx, by, r, j)
	return err
}

// FinalizeMigration turns the quiesced machine at key into the locked stub of the seed that
// redirects to endpoint: Meta keeps only feature-flags, tasks, profiles, params and pool are
// cleared. Its jobs get Meta.redirect-endpoint and all but the current one are archived. The
// snapshot is refreshed first, so RestoreMigration and Export see the latest live state.
// Finalizing again to the same endpoint changes nothing.
func (s *Store) FinalizeMigration(ctx context.Context, by Principal, key, endpoint string) (api.Machine, error) {
	if err := validURL("finalize", "RedirectEndpoint", endpoint); err != nil {
		return api.Machine{}, err
	}
	return s.machineOp(ctx, key, func(tx pgx.Tx, r row[api.Machine]) (*api.Machine, error) {
		m := r.obj
		if err := refuseOtherMigration(ctx, tx, m); err != nil {
			return nil, err
		}
		if to := m.Meta[api.MetaRedirectEndpoint]; to == endpoint {
			return nil, nil
		} else if to != "" {
			return nil, conflictf("machine %s (%s) was already migrated to %s", m.Name, m.Uuid, to)
		}
		snap, err := loadSnapshot(ctx, tx, m.Uuid, true)
		if err != nil {
			return nil, err
		}
		if snap == nil {
			return nil, conflictf("machine %s (%s) is not quiesced; quiesce it before finalizing its migration", m.Name, m.Uuid)
		}
		js, err := machineJobs(ctx, tx, m.Uuid, true)
		if err != nil {
			return nil, err
		}
		live, err := snap.live(m)
		if err != nil {
			return nil, err
		}
		snap.machine, snap.jobs = *live, jobObjects(js)
		if err := saveSnapshot(ctx, tx, snap); err != nil {
			return nil, err
		}
		stored, err := updateMachine(ctx, tx, by, r, stubOf(live, endpoint))
		if err != nil {
			return nil, err
		}
		if err := redirectJobs(ctx, tx, by, js, endpoint, archiveFinished); err != nil {
			return nil, err
		}
		return stored, recordEvent(ctx, tx, by, "finalize-migration", api.KindMachines, m.Uuid, map[string]any{"RedirectEndpoint": endpoint})
	})
}

// stubOf is the seed's locked stub of live: identity and hardware kept, everything that
// would make the machine do work cleared.
func stubOf(live *api.Machine, endpoint string) *api.Machine {
	stub := *live
	stub.Available = true
	stub.BootEnv = "local"
	stub.CurrentJob = ""
	stub.CurrentTask = 0
	stub.Description = "Migrated to " + endpoint
	stub.Locked = true
	stub.Meta = map[string]string{api.MetaRedirectEndpoint: endpoint}
	if ff, ok := live.Meta[metaFeatureFlags]; ok {
		stub.Meta[metaFeatureFlags] = ff
	}
	stub.Params = map[string]any{}
	stub.Pool = ""
	stub.PoolStatus = ""
	stub.Profiles = []string{}
	stub.Runnable = false
	stub.Stage = "none"
	stub.Tasks = []string{}
	stub.Workflow = ""
	stub.WorkflowComplete = false
	return &stub
}

// RestoreMigration undoes FinalizeMigration: the machine and its jobs come back from the
// snapshot, the machine still quiesced (Runnable=false, Meta.migrating) so Unquiesce can
// follow. A machine that is not a stub is returned unchanged.
func (s *Store) RestoreMigration(ctx context.Context, by Principal, key string) (api.Machine, error) {
	return s.machineOp(ctx, key, func(tx pgx.Tx, r row[api.Machine]) (*api.Machine, error) {
		if err := refuseOtherMigration(ctx, tx, r.obj); err != nil {
			return nil, err
		}
		if !isStub(r.obj) {
			return nil, nil
		}
		snap, err := loadSnapshot(ctx, tx, r.obj.Uuid, true)
		if err != nil {
			return nil, err
		}
		if snap == nil {
			return nil, conflictf("machine %s (%s) has no snapshot to restore its migration from", r.obj.Name, r.obj.Uuid)
		}
		m, err := clone(&snap.machine)
		if err != nil {
			return nil, err
		}
		m.Runnable = false
		emptyMeta(&m.Meta)
		m.Meta[api.MetaMigrating] = snap.migration
		stored, err := updateMachine(ctx, tx, by, r, m)
		if err != nil {
			return nil, err
		}
		for i := range snap.jobs {
			if err := upsertJob(ctx, tx, by, &snap.jobs[i]); err != nil {
				return nil, err
			}
		}
		return stored, recordEvent(ctx, tx, by, "restore-migration", api.KindMachines, r.obj.Uuid, map[string]any{"Migration": snap.migration})
	})
}

// Activate makes an imported machine live: Runnable and Available. A stub or a machine held
// by a migration is ErrConflict; an active machine is returned unchanged.
func (s *Store) Activate(ctx context.Context, by Principal, key string) (api.Machine, error) {
	return s.machineOp(ctx, key, func(tx pgx.Tx, r row[api.Machine]) (*api.Machine, error) {
		m := r.obj
		if err := refuseOtherMigration(ctx, tx, m); err != nil {
			return nil, err
		}
		switch {
		case isStub(m):
			return nil, conflictf("machine %s (%s) is a stub migrated to %s; activate it there", m.Name, m.Uuid, m.Meta[api.MetaRedirectEndpoint])
		case m.Meta[api.MetaMigrating] != "":
			return nil, conflictf("machine %s (%s) is quiesced by migration %s; unquiesce it instead", m.Name, m.Uuid, m.Meta[api.MetaMigrating])
		case m.Runnable && m.Available:
			return nil, closeTickets(ctx, tx, m.Uuid)
		}
		a, err := clone(m)
		if err != nil {
			return nil, err
		}
		a.Runnable, a.Available = true, true
		stored, err := updateMachine(ctx, tx, by, r, a)
		if err != nil {
			return nil, err
		}
		// Activation completes the import: its ticket can never import again.
		if err := closeTickets(ctx, tx, m.Uuid); err != nil {
			return nil, err
		}
		return stored, recordEvent(ctx, tx, by, "activate", api.KindMachines, m.Uuid, map[string]any{})
	})
}

// redirectJobs points the jobs of a machine that became a stub at endpoint, archiving those
// archive says.
func redirectJobs(ctx context.Context, tx pgx.Tx, by Principal, js []row[api.Job], endpoint string, archive func(api.Job) bool) error {
	for _, jr := range js {
		j, err := clone(jr.obj)
		if err != nil {
			return err
		}
		emptyMeta(&j.Meta)
		j.Meta[api.MetaRedirectEndpoint] = endpoint
		j.Archived = archive(*j)
		if _, err := updateJob(ctx, tx, by, jr, j); err != nil {
			return err
		}
	}
	return nil
}

// archiveFinished archives every job but the current one (the seed's finalized source keeps
// its current job unarchived); archiveAll archives every job (a redirect copy runs none).
func archiveFinished(j api.Job) bool { return !j.Current }
func archiveAll(api.Job) bool        { return true }
