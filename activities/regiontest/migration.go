package regiontest

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/ironflow/ironflow/region/api"
)

// The migration primitives, each as region/store/migration.go and migration_undo.go define
// it; contract_test.go holds the two to the same cases.

// agentMetaKeys are the Meta keys the agent reports, kept from the live machine when the
// snapshot's Meta comes back (region/store: agentMetaKeys).
var agentMetaKeys = []string{api.MetaAgentLastSeen, api.MetaAgentEndpoint, api.MetaAgentVersion}

// metaFeatureFlags is the one Meta key a stub keeps.
const metaFeatureFlags = "feature-flags"

func isStub(m api.Machine) bool { return m.Meta[api.MetaRedirectEndpoint] != "" }

// holder is the migration that holds m against deletion: the one that quiesced it, the one
// whose stub it is, or, for an inactive imported copy, its open import; "" when none.
func (r *Region) holder(m api.Machine) string {
	if id := m.Meta[api.MetaMigrating]; id != "" {
		return id
	}
	if isStub(m) {
		return r.snapshots[m.Uuid].migration
	}
	if m.Runnable {
		return ""
	}
	if t := r.openImport(m.Uuid, ""); t != nil {
		if t.migration != "" {
			return t.migration
		}
		return "the import of ticket " + t.id
	}
	return ""
}

// onHeldMachine is onMachine for a step of migration ("" names none): a machine another
// migration holds is a conflict, and so is a step of an attempt older than one that acted on
// the machine (checkFence).
func onHeldMachine[T any](ctx context.Context, r *Region, method, key, migration string, fn func(m api.Machine) (T, error)) (T, error) {
	return onMachine(r, method, key, func(m api.Machine) (T, error) {
		if held := r.holder(m); migration != "" && held != "" && held != migration {
			var zero T
			return zero, apiErr(http.StatusConflict, "machine %s (%s) is held by migration %s; migration %s may not act on it", m.Name, m.Uuid, held, migration)
		}
		return fenced(ctx, r, m, migration, func() (T, error) { return fn(m) })
	})
}

// openImport returns a ticket spent on machine and not closed, other than the token except.
func (r *Region) openImport(machine, except string) *ticket {
	for _, token := range slices.Sorted(maps.Keys(r.tickets)) {
		if t := r.tickets[token]; token != except && t.machine == machine && !t.closed {
			return t
		}
	}
	return nil
}

func (r *Region) closeTickets(machine string) {
	for _, t := range r.tickets {
		if t.machine == machine {
			t.closed = true
		}
	}
}

// live is m as it would be without the migration: a stub's snapshot, or m with the Runnable
// and Meta it had before quiesce plus what its agent reported since.
func (snap snapshot) live(m api.Machine) api.Machine {
	if isStub(m) {
		return cloneMachine(snap.machine)
	}
	l := cloneMachine(m)
	l.Runnable = snap.machine.Runnable
	l.Meta = maps.Clone(snap.machine.Meta)
	if l.Meta == nil {
		l.Meta = map[string]string{}
	}
	for _, k := range agentMetaKeys {
		if v, ok := m.Meta[k]; ok {
			l.Meta[k] = v
		}
	}
	return l
}

// onMachine runs fn on the machine at key, under the lock, once the call is recorded and no
// failure is injected.
func onMachine[T any](r *Region, method, key string, fn func(m api.Machine) (T, error)) (T, error) {
	r.waitIfHeld(method)
	r.mu.Lock()
	defer r.mu.Unlock()
	var zero T
	if err := r.enter(method, key, true); err != nil {
		return zero, err
	}
	m, err := r.lookup(key)
	if err != nil {
		return zero, err
	}
	return fn(m)
}

// MintTicket implements activities.Region.
func (r *Region) MintTicket(context.Context, api.TicketRequest) (api.Ticket, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("MintTicket", "", true); err != nil {
		return api.Ticket{}, err
	}
	r.minted++
	id := fmt.Sprintf("%s-ticket-%d", r.info.Name, r.minted)
	r.tickets[id] = &ticket{id: id}
	return api.Ticket{Endpoint: r.info.URL, Region: r.info.Name, ID: id, Token: id}, nil
}

// Quiesce implements activities.Region.
func (r *Region) Quiesce(ctx context.Context, key string, req api.QuiesceRequest) (api.Machine, error) {
	return onMachine(r, "Quiesce", key, func(m api.Machine) (api.Machine, error) {
		if strings.TrimSpace(req.Migration) == "" {
			return api.Machine{}, apiErr(http.StatusUnprocessableEntity, "quiesce needs the migration that holds the machine")
		}
		held := m.Meta[api.MetaMigrating]
		switch {
		case isStub(m):
			return api.Machine{}, apiErr(http.StatusConflict, "machine %s (%s) was already migrated to %s", m.Name, m.Uuid, m.Meta[api.MetaRedirectEndpoint])
		case held != "" && held != req.Migration:
			return api.Machine{}, apiErr(http.StatusConflict, "machine %s is being migrated by %s", m.Uuid, held)
		case held == "" && m.WorkOrderMode:
			return api.Machine{}, apiErr(http.StatusUnprocessableEntity, "machine %s (%s) has WorkOrderMode set; turn it off to migrate", m.Name, m.Uuid)
		}
		return fenced(ctx, r, m, req.Migration, func() (api.Machine, error) { return r.quiesce(m, req.Migration, held), nil })
	})
}

// quiesce holds m for migration, unless it holds it already (held).
func (r *Region) quiesce(m api.Machine, migration, held string) api.Machine {
	if held == migration {
		return cloneMachine(m)
	}
	r.snapshots[m.Uuid] = snapshot{migration: migration, machine: cloneMachine(m), jobs: r.jobsOf(m.Uuid)}
	m = cloneMachine(m)
	m.Runnable = false
	if m.Meta == nil {
		m.Meta = map[string]string{}
	}
	m.Meta[api.MetaMigrating] = migration
	r.machines[m.Uuid] = m
	return cloneMachine(m)
}

// UnquiesceFor implements activities.Region: without a snapshot the machine is unchanged.
func (r *Region) UnquiesceFor(ctx context.Context, key, migration string) (api.Machine, error) {
	return onHeldMachine(ctx, r, "Unquiesce", key, migration, func(m api.Machine) (api.Machine, error) {
		snap, ok := r.snapshots[m.Uuid]
		switch {
		case !ok:
			return cloneMachine(m), nil
		case isStub(m):
			return api.Machine{}, apiErr(http.StatusConflict, "machine %s (%s) is a stub migrated to %s; restore the migration before unquiescing", m.Name, m.Uuid, m.Meta[api.MetaRedirectEndpoint])
		}
		m = snap.live(m)
		r.machines[m.Uuid] = m
		delete(r.snapshots, m.Uuid)
		return cloneMachine(m), nil
	})
}

// Export implements activities.Region: the machine as it was before quiesce (a stub's
// snapshot), its jobs and the profiles it names.
func (r *Region) Export(_ context.Context, key string) (api.Bundle, error) {
	return onMachine(r, "Export", key, func(m api.Machine) (api.Bundle, error) {
		snap, quiesced := r.snapshots[m.Uuid]
		jobs := r.jobsOf(m.Uuid)
		switch {
		case quiesced && isStub(m):
			jobs = snap.jobs // the stub's own jobs were rewritten by finalize
			m = snap.live(m)
		case quiesced:
			m = snap.live(m)
		case isStub(m):
			return api.Bundle{}, apiErr(http.StatusConflict, "machine %s (%s) is a stub migrated to %s; there is nothing to export", m.Name, m.Uuid, m.Meta[api.MetaRedirectEndpoint])
		}
		b := api.Bundle{Machine: cloneMachine(m), Jobs: cloneJobs(jobs), JobLogs: map[string]string{}}
		for _, name := range m.Profiles {
			if p, ok := r.profiles[name]; ok {
				b.Profiles = append(b.Profiles, p)
			}
		}
		return b, nil
	})
}

// Import implements activities.Region: the ticket is checked and spent (again for the same
// machine while that import is open), the machine arrives inactive over nothing, its own
// stub or an inactive earlier import, and the destination's profiles win.
func (r *Region) Import(ctx context.Context, req api.ImportRequest) (api.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := cloneMachine(req.Bundle.Machine)
	if err := r.enter("Import", m.Uuid, true); err != nil {
		return api.Machine{}, err
	}
	if isStub(m) {
		return api.Machine{}, apiErr(http.StatusUnprocessableEntity, "the bundle's machine %s (%s) is a stub migrated to %s", m.Name, m.Uuid, m.Meta[api.MetaRedirectEndpoint])
	}
	return fenced(ctx, r, m, req.Migration, func() (api.Machine, error) { return r.importMachine(req, m) })
}

// importMachine stores m, the machine of req's bundle.
func (r *Region) importMachine(req api.ImportRequest, m api.Machine) (api.Machine, error) {
	t, reused, err := r.ticketFor(req.Ticket, m.Uuid)
	if err != nil {
		return api.Machine{}, err
	}
	if other, err := r.lookup("Name:" + m.Name); err == nil && other.Uuid != m.Uuid {
		return api.Machine{}, apiErr(http.StatusConflict, "name %s is used by machine %s", m.Name, other.Uuid)
	}
	if holder, ok := r.addressHolder(m); ok {
		return api.Machine{}, apiErr(http.StatusConflict, "machine %s Address %s is already the address of machine %s (%s)", m.Name, m.Address, holder.Name, holder.Uuid)
	}
	if missing, ok := r.missingImage(m.Name, m.Image); ok {
		return api.Machine{}, apiErr(http.StatusConflict, "%s", missing)
	}
	if existing, ok := r.machines[m.Uuid]; ok && !(isStub(existing) && existing.Locked) {
		earlier := reused || !existing.Runnable && r.openImport(m.Uuid, req.Ticket) != nil
		if !earlier || existing.Runnable {
			return api.Machine{}, apiErr(http.StatusConflict, "machine %s (%s) already exists on this region and is neither a migrated stub nor an inactive earlier import", existing.Name, existing.Uuid)
		}
	}
	for _, j := range req.Bundle.Jobs {
		if old, ok := r.jobs[j.Uuid]; ok && old.Machine != j.Machine {
			return api.Machine{}, apiErr(http.StatusConflict, "job %s belongs to machine %s on this region, not to %s", j.Uuid, old.Machine, j.Machine)
		}
	}
	t.machine, t.migration = m.Uuid, req.Migration
	delete(m.Meta, api.MetaMigrating)
	m.Runnable, m.Available = false, false
	r.machines[m.Uuid] = m
	delete(r.snapshots, m.Uuid) // a machine back over its stub must not unquiesce to stale state
	for _, j := range req.Bundle.Jobs {
		j = cloneJob(j)
		if j.Uuid == m.CurrentJob {
			j.Meta[api.MetaRedirectEndpoint] = r.info.URL
		}
		r.jobs[j.Uuid] = j
	}
	for _, p := range req.Bundle.Profiles {
		if _, ok := r.profiles[p.Name]; !ok {
			r.profiles[p.Name] = p
		}
	}
	return cloneMachine(m), nil
}

// addressHolder finds another machine with m's Address: a machine's address is unique in a
// region.
func (r *Region) addressHolder(m api.Machine) (api.Machine, bool) {
	a, err := netip.ParseAddr(m.Address)
	if err != nil {
		return api.Machine{}, false
	}
	for _, uuid := range slices.Sorted(maps.Keys(r.machines)) {
		if o := r.machines[uuid]; uuid != m.Uuid && o.Address != "" {
			if b, err := netip.ParseAddr(o.Address); err == nil && a == b {
				return o, true
			}
		}
	}
	return api.Machine{}, false
}

// ticketFor checks token for the import of machine; reused reports a ticket already spent
// on this machine by an import still open.
func (r *Region) ticketFor(token, machine string) (t *ticket, reused bool, err error) {
	t, ok := r.tickets[token]
	switch {
	case !ok && strings.Contains(token, "-ticket-") && !strings.HasPrefix(token, r.info.Name+"-ticket-"):
		return nil, false, apiErr(http.StatusForbidden, "ticket is not valid for region %s: it was minted by another region", r.info.Name)
	case !ok:
		return nil, false, apiErr(http.StatusUnauthorized, "ticket is not valid for region %s", r.info.Name)
	case t.closed:
		return nil, false, apiErr(http.StatusConflict, "ticket %s was spent on an import that completed; a ticket imports once", t.id)
	case t.machine != "" && t.machine != machine:
		return nil, false, apiErr(http.StatusConflict, "ticket was already used for the import of machine %s", t.machine)
	}
	return t, t.machine == machine, nil
}

// FinalizeMigrationFor implements activities.Region: the quiesced machine becomes the locked
// stub redirecting to the endpoint; again to the same endpoint changes nothing.
func (r *Region) FinalizeMigrationFor(ctx context.Context, key, migration string, req api.FinalizeRequest) (api.Machine, error) {
	return onHeldMachine(ctx, r, "FinalizeMigration", key, migration, func(m api.Machine) (api.Machine, error) {
		if to := m.Meta[api.MetaRedirectEndpoint]; to == req.RedirectEndpoint {
			return cloneMachine(m), nil
		} else if to != "" {
			return api.Machine{}, apiErr(http.StatusConflict, "machine %s (%s) was already migrated to %s", m.Name, m.Uuid, to)
		}
		snap, ok := r.snapshots[m.Uuid]
		if !ok {
			return api.Machine{}, apiErr(http.StatusConflict, "machine %s (%s) is not quiesced; quiesce it before finalizing its migration", m.Name, m.Uuid)
		}
		live := snap.live(m)
		snap.machine, snap.jobs = cloneMachine(live), r.jobsOf(m.Uuid)
		r.snapshots[m.Uuid] = snap
		return r.stub(live, req.RedirectEndpoint, func(j api.Job) bool { return !j.Current }), nil
	})
}

// stub stores the locked stub of m redirecting to endpoint and points its jobs there,
// archiving those archive says.
func (r *Region) stub(m api.Machine, endpoint string, archive func(api.Job) bool) api.Machine {
	s := cloneMachine(m)
	s.Locked, s.Runnable, s.Available, s.WorkflowComplete = true, false, true, false
	s.BootEnv, s.Stage, s.Workflow, s.CurrentJob, s.CurrentTask = "local", "none", "", "", 0
	s.Description = "Migrated to " + endpoint
	s.Tasks, s.Profiles, s.Params, s.Pool, s.PoolStatus = []string{}, []string{}, map[string]any{}, "", ""
	s.Meta = map[string]string{api.MetaRedirectEndpoint: endpoint}
	if ff, ok := m.Meta[metaFeatureFlags]; ok {
		s.Meta[metaFeatureFlags] = ff
	}
	r.machines[s.Uuid] = s
	for _, j := range r.jobsOf(s.Uuid) {
		j.Archived = j.Archived || archive(j)
		j.Meta[api.MetaRedirectEndpoint] = endpoint
		r.jobs[j.Uuid] = j
	}
	return cloneMachine(s)
}

// RedirectCopy implements activities.Region: an inactive imported copy becomes a stub
// redirecting to the endpoint, for the migration that imported it only.
func (r *Region) RedirectCopy(ctx context.Context, key string, req api.RedirectCopyRequest) (api.Machine, error) {
	return onMachine(r, "RedirectCopy", key, func(m api.Machine) (api.Machine, error) {
		switch to := m.Meta[api.MetaRedirectEndpoint]; {
		case to == req.RedirectEndpoint:
			return cloneMachine(m), nil
		case to != "":
			return api.Machine{}, apiErr(http.StatusConflict, "machine %s (%s) is a stub redirecting to %s", m.Name, m.Uuid, to)
		case m.Runnable:
			return api.Machine{}, apiErr(http.StatusConflict, "machine %s is active", m.Uuid)
		case m.Meta[api.MetaMigrating] != "":
			return api.Machine{}, apiErr(http.StatusConflict, "machine %s (%s) is quiesced by migration %s; only an imported copy can redirect", m.Name, m.Uuid, m.Meta[api.MetaMigrating])
		}
		if held := r.holder(m); held != "" && held != req.Migration {
			return api.Machine{}, apiErr(http.StatusConflict, "machine %s (%s) is held by migration %s; only that migration may undo its copy", m.Name, m.Uuid, held)
		}
		return fenced(ctx, r, m, req.Migration, func() (api.Machine, error) {
			if !slices.ContainsFunc(slices.Collect(maps.Values(r.tickets)), func(t *ticket) bool { return t.machine == m.Uuid }) {
				return api.Machine{}, apiErr(http.StatusConflict, "machine %s (%s) was not imported into this region; only an imported copy can redirect", m.Name, m.Uuid)
			}
			s := r.stub(m, req.RedirectEndpoint, func(api.Job) bool { return true })
			r.closeTickets(m.Uuid)
			return s, nil
		})
	})
}

// RestoreMigrationFor implements activities.Region: a stub's machine and jobs come back from
// the quiesce snapshot, still quiesced; a machine that is not a stub is unchanged.
func (r *Region) RestoreMigrationFor(ctx context.Context, key, migration string) (api.Machine, error) {
	return onHeldMachine(ctx, r, "RestoreMigration", key, migration, func(m api.Machine) (api.Machine, error) {
		if !isStub(m) {
			return cloneMachine(m), nil
		}
		snap, ok := r.snapshots[m.Uuid]
		if !ok {
			return api.Machine{}, apiErr(http.StatusConflict, "machine %s (%s) has no snapshot to restore its migration from", m.Name, m.Uuid)
		}
		restored := cloneMachine(snap.machine)
		restored.Runnable = false
		if restored.Meta == nil {
			restored.Meta = map[string]string{}
		}
		restored.Meta[api.MetaMigrating] = snap.migration
		r.machines[m.Uuid] = restored
		for _, j := range snap.jobs {
			r.jobs[j.Uuid] = cloneJob(j)
		}
		return cloneMachine(restored), nil
	})
}

// ActivateFor implements activities.Region: an imported copy goes live and its import's
// tickets close; a stub or a quiesced machine is a conflict.
func (r *Region) ActivateFor(ctx context.Context, key, migration string) (api.Machine, error) {
	return onHeldMachine(ctx, r, "Activate", key, migration, func(m api.Machine) (api.Machine, error) {
		switch {
		case isStub(m):
			return api.Machine{}, apiErr(http.StatusConflict, "machine %s (%s) is a stub migrated to %s; activate it there", m.Name, m.Uuid, m.Meta[api.MetaRedirectEndpoint])
		case m.Meta[api.MetaMigrating] != "":
			return api.Machine{}, apiErr(http.StatusConflict, "machine %s (%s) is quiesced by migration %s; unquiesce it instead", m.Name, m.Uuid, m.Meta[api.MetaMigrating])
		}
		m = cloneMachine(m)
		m.Runnable, m.Available = true, true
		r.machines[m.Uuid] = m
		r.closeTickets(m.Uuid)
		return cloneMachine(m), nil
	})
}

func cloneJobs(js []api.Job) []api.Job {
	out := make([]api.Job, len(js))
	for i, j := range js {
		out[i] = cloneJob(j)
	}
	return out
}
