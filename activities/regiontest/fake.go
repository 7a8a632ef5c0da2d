// Package regiontest is an in-memory region that follows the migration contract of
// region/api/migration.go, for testing activities and workflows without PostgreSQL. It records
// every call and can be told to fail calls with an HTTP status.
package regiontest

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// Region is one fake region.
type Region struct {
	info api.Info

	mu        sync.Mutex
	machines  map[string]api.Machine // by UUID
	jobs      map[string]api.Job     // by UUID
	profiles  map[string]api.Profile // by Name
	snapshots map[string]snapshot    // by machine UUID, taken at quiesce
	tickets   map[string]bool        // token -> spent
	failures  map[string]failure     // by method name
	journal   *Journal
}

// Journal records the state-changing calls of one or more regions in the order they happen.
type Journal struct {
	mu    sync.Mutex
	calls []string
}

// Calls returns the calls so far, as "region Method key".
func (j *Journal) Calls() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.calls)
}

func (j *Journal) add(call string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, call)
}

type snapshot struct {
	machine api.Machine
	jobs    []api.Job
}

type failure struct {
	status int
	times  int // < 0: always
}

// New returns an empty region called name at url that records its calls in journal.
func New(name, url string, journal *Journal) *Region {
	return &Region{
		info:      api.Info{Name: name, Uuid: "uuid-" + name, URL: url, Endpoints: []string{url}, Version: "test"},
		machines:  map[string]api.Machine{},
		jobs:      map[string]api.Job{},
		profiles:  map[string]api.Profile{},
		snapshots: map[string]snapshot{},
		tickets:   map[string]bool{},
		failures:  map[string]failure{},
		journal:   journal,
	}
}

// Put stores a machine as it is.
func (r *Region) Put(m api.Machine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m.Normalize()
	r.machines[m.Uuid] = cloneMachine(m)
}

// PutJobs stores jobs as they are.
func (r *Region) PutJobs(jobs ...api.Job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range jobs {
		r.jobs[j.Uuid] = cloneJob(j)
	}
}

// PutProfiles stores profiles as they are.
func (r *Region) PutProfiles(profiles ...api.Profile) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range profiles {
		r.profiles[p.Name] = p
	}
}

// Update changes a stored machine in place (e.g. an agent check-in).
func (r *Region) Update(uuid string, change func(*api.Machine)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.machines[uuid]
	change(&m)
	r.machines[uuid] = m
}

// SetMachineParam sets one param of the machine at key.
func (r *Region) SetMachineParam(ctx context.Context, key, name string, value any) error {
	m, err := r.GetMachine(ctx, key)
	if err != nil {
		return err
	}
	r.Update(m.Uuid, func(m *api.Machine) {
		if m.Params == nil {
			m.Params = map[string]any{}
		}
		m.Params[name] = value
	})
	return nil
}

// Machine returns a copy of the stored machine.
func (r *Region) Machine(uuid string) (api.Machine, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.machines[uuid]
	return cloneMachine(m), ok
}

// Jobs returns the jobs of a machine, sorted by UUID.
func (r *Region) Jobs(machine string) []api.Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobsOf(machine)
}

// Profile returns a stored profile.
func (r *Region) Profile(name string) (api.Profile, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.profiles[name]
	return p, ok
}

// Fail makes the next times calls of method (a Region method name) fail with an HTTP status;
// times < 0 fails every call.
func (r *Region) Fail(method string, status, times int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures[method] = failure{status: status, times: times}
}

// enter records a call and returns the injected failure, if any. Reads are not recorded.
func (r *Region) enter(method, key string, record bool) error {
	if record {
		r.journal.add(strings.TrimSpace(r.info.Name + " " + method + " " + key))
	}
	f, ok := r.failures[method]
	if !ok || f.times == 0 {
		return nil
	}
	if f.times > 0 {
		f.times--
		r.failures[method] = f
	}
	return &client.APIError{StatusCode: f.status, Message: fmt.Sprintf("injected failure of %s", method)}
}

func apiErr(status int, format string, args ...any) error {
	return &client.APIError{StatusCode: status, Message: fmt.Sprintf(format, args...)}
}

func (r *Region) lookup(key string) (api.Machine, error) {
	field, value, keyed := strings.Cut(key, ":")
	if !keyed {
		if m, ok := r.machines[key]; ok {
			return m, nil
		}
		return api.Machine{}, apiErr(http.StatusNotFound, "machine %s not found", key)
	}
	for _, uuid := range slices.Sorted(maps.Keys(r.machines)) {
		m := r.machines[uuid]
		if field == "Name" && m.Name == value || field == "HardwareAddrs" && slices.Contains(m.HardwareAddrs, value) {
			return m, nil
		}
	}
	return api.Machine{}, apiErr(http.StatusNotFound, "machine %s not found", key)
}

func (r *Region) jobsOf(machine string) []api.Job {
	var out []api.Job
	for _, uuid := range slices.Sorted(maps.Keys(r.jobs)) {
		if r.jobs[uuid].Machine == machine {
			out = append(out, cloneJob(r.jobs[uuid]))
		}
	}
	return out
}

// Info implements activities.Region.
func (r *Region) Info(context.Context) (api.Info, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.info, r.enter("Info", "", false)
}

// GetMachine implements activities.Region.
func (r *Region) GetMachine(_ context.Context, key string) (api.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("GetMachine", key, false); err != nil {
		return api.Machine{}, err
	}
	m, err := r.lookup(key)
	return cloneMachine(m), err
}

// GetJob implements activities.Region.
func (r *Region) GetJob(_ context.Context, key string) (api.Job, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("GetJob", key, false); err != nil {
		return api.Job{}, err
	}
	j, ok := r.jobs[key]
	if !ok {
		return j, apiErr(http.StatusNotFound, "job %s not found", key)
	}
	return cloneJob(j), nil
}

// DeleteMachine implements activities.Region.
func (r *Region) DeleteMachine(_ context.Context, key, _ string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("DeleteMachine", key, true); err != nil {
		return err
	}
	m, err := r.lookup(key)
	if err != nil {
		return err
	}
	r.remove(m.Uuid)
	return nil
}

// Delete removes a machine, its snapshot and its jobs without going through the API (as a
// DELETE in the region's database would).
func (r *Region) Delete(uuid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.remove(uuid)
}

func (r *Region) remove(uuid string) {
	delete(r.machines, uuid)
	delete(r.snapshots, uuid)
	for _, j := range r.jobsOf(uuid) {
		delete(r.jobs, j.Uuid)
	}
}

// MintTicket implements activities.Region.
func (r *Region) MintTicket(context.Context, api.TicketRequest) (api.Ticket, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("MintTicket", "", true); err != nil {
		return api.Ticket{}, err
	}
	id := fmt.Sprintf("%s-ticket-%d", r.info.Name, len(r.tickets)+1)
	r.tickets[id] = false
	return api.Ticket{Endpoint: r.info.URL, Region: r.info.Name, ID: id, Token: id}, nil
}

// Quiesce implements activities.Region.
func (r *Region) Quiesce(_ context.Context, key string, req api.QuiesceRequest) (api.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("Quiesce", key, true); err != nil {
		return api.Machine{}, err
	}
	m, err := r.lookup(key)
	if err != nil {
		return m, err
	}
	if held := m.Meta[api.MetaMigrating]; held != "" && held != req.Migration {
		return m, apiErr(http.StatusConflict, "machine %s is being migrated by %s", m.Uuid, held)
	}
	if _, ok := r.snapshots[m.Uuid]; !ok {
		r.snapshots[m.Uuid] = snapshot{machine: cloneMachine(m), jobs: r.jobsOf(m.Uuid)}
	}
	m.Runnable = false
	m.Meta[api.MetaMigrating] = req.Migration
	r.machines[m.Uuid] = m
	return cloneMachine(m), nil
}

// Unquiesce implements activities.Region.
func (r *Region) Unquiesce(_ context.Context, key string) (api.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("Unquiesce", key, true); err != nil {
		return api.Machine{}, err
	}
	m, err := r.lookup(key)
	if err != nil {
		return m, err
	}
	snap, ok := r.snapshots[m.Uuid]
	if !ok {
		return m, apiErr(http.StatusConflict, "machine %s is not quiesced", m.Uuid)
	}
	m.Runnable = snap.machine.Runnable
	m.Meta = maps.Clone(snap.machine.Meta)
	r.machines[m.Uuid] = m
	delete(r.snapshots, m.Uuid)
	return cloneMachine(m), nil
}

// Export implements activities.Region.
func (r *Region) Export(_ context.Context, key string) (api.Bundle, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("Export", key, true); err != nil {
		return api.Bundle{}, err
	}
	m, err := r.lookup(key)
	if err != nil {
		return api.Bundle{}, err
	}
	b := api.Bundle{Machine: cloneMachine(m), Jobs: r.jobsOf(m.Uuid), JobLogs: map[string]string{}}
	for _, name := range m.Profiles {
		if p, ok := r.profiles[name]; ok {
			b.Profiles = append(b.Profiles, p)
		}
	}
	return b, nil
}

// Import implements activities.Region: ticket checked and spent, idempotent by UUID, the
// machine arrives inactive, destination profiles win.
func (r *Region) Import(_ context.Context, req api.ImportRequest) (api.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := cloneMachine(req.Bundle.Machine)
	if err := r.enter("Import", m.Uuid, true); err != nil {
		return api.Machine{}, err
	}
	if existing, ok := r.machines[m.Uuid]; ok {
		return cloneMachine(existing), nil
	}
	spent, known := r.tickets[req.Ticket]
	switch {
	case !known:
		return api.Machine{}, apiErr(http.StatusForbidden, "ticket is not valid for region %s", r.info.Name)
	case spent:
		return api.Machine{}, apiErr(http.StatusForbidden, "ticket was already used")
	}
	if other, err := r.lookup("Name:" + m.Name); err == nil {
		return api.Machine{}, apiErr(http.StatusConflict, "name %s is used by machine %s", m.Name, other.Uuid)
	}
	r.tickets[req.Ticket] = true
	m.Runnable, m.Available = false, false
	r.machines[m.Uuid] = m
	for _, j := range req.Bundle.Jobs {
		r.jobs[j.Uuid] = cloneJob(j)
	}
	for _, p := range req.Bundle.Profiles {
		if _, ok := r.profiles[p.Name]; !ok {
			r.profiles[p.Name] = p
		}
	}
	return cloneMachine(m), nil
}

// FinalizeMigration implements activities.Region: the locked stub of the seed.
func (r *Region) FinalizeMigration(_ context.Context, key string, req api.FinalizeRequest) (api.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("FinalizeMigration", key, true); err != nil {
		return api.Machine{}, err
	}
	m, err := r.lookup(key)
	if err != nil {
		return m, err
	}
	return r.stub(m, req.RedirectEndpoint), nil
}

// stub turns m into the seed's locked stub redirecting to endpoint, with its jobs archived.
func (r *Region) stub(m api.Machine, endpoint string) api.Machine {
	m.Locked, m.Runnable, m.Available = true, false, true
	m.BootEnv, m.Stage, m.Workflow, m.CurrentJob, m.CurrentTask = "local", "none", "", "", 0
	m.Description = "Migrated to " + endpoint
	m.Tasks, m.Profiles, m.Params, m.Pool, m.PoolStatus = []string{}, []string{}, map[string]any{}, "", ""
	m.Meta[api.MetaRedirectEndpoint] = endpoint
	r.machines[m.Uuid] = m
	for _, j := range r.jobsOf(m.Uuid) {
		j.Archived = true
		j.Meta[api.MetaRedirectEndpoint] = endpoint
		r.jobs[j.Uuid] = j
	}
	return cloneMachine(m)
}

// RedirectCopy implements activities.Region: an inactive copy becomes a stub redirecting to
// the endpoint; an active machine is a conflict.
func (r *Region) RedirectCopy(_ context.Context, key string, req api.RedirectCopyRequest) (api.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("RedirectCopy", key, true); err != nil {
		return api.Machine{}, err
	}
	m, err := r.lookup(key)
	if err != nil {
		return m, err
	}
	if m.Runnable {
		return m, apiErr(http.StatusConflict, "machine %s is active", m.Uuid)
	}
	return r.stub(m, req.RedirectEndpoint), nil
}

// RestoreMigration implements activities.Region: the machine and its jobs come back from the
// quiesce snapshot, still quiesced.
func (r *Region) RestoreMigration(_ context.Context, key string) (api.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("RestoreMigration", key, true); err != nil {
		return api.Machine{}, err
	}
	m, err := r.lookup(key)
	if err != nil {
		return m, err
	}
	snap, ok := r.snapshots[m.Uuid]
	if !ok {
		return m, apiErr(http.StatusConflict, "machine %s has no migration snapshot", m.Uuid)
	}
	restored := cloneMachine(snap.machine)
	restored.Runnable = false
	restored.Meta[api.MetaMigrating] = m.Meta[api.MetaMigrating]
	r.machines[m.Uuid] = restored
	for _, j := range snap.jobs {
		r.jobs[j.Uuid] = cloneJob(j)
	}
	return cloneMachine(restored), nil
}

// Activate implements activities.Region.
func (r *Region) Activate(_ context.Context, key string) (api.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("Activate", key, true); err != nil {
		return api.Machine{}, err
	}
	m, err := r.lookup(key)
	if err != nil {
		return m, err
	}
	m.Runnable, m.Available = true, true
	delete(m.Meta, api.MetaMigrating)
	r.machines[m.Uuid] = m
	return cloneMachine(m), nil
}

func cloneMachine(m api.Machine) api.Machine {
	m.Meta = maps.Clone(m.Meta)
	m.Params = maps.Clone(m.Params)
	m.Profiles = slices.Clone(m.Profiles)
	m.Tasks = slices.Clone(m.Tasks)
	m.HardwareAddrs = slices.Clone(m.HardwareAddrs)
	return m
}

func cloneJob(j api.Job) api.Job {
	j.Meta = maps.Clone(j.Meta)
	if j.Meta == nil {
		j.Meta = map[string]string{}
	}
	return j
}

// VerifyGrant implements activities.Region: the fake trusts every grant; inject a failure to
// have it refused.
func (r *Region) VerifyGrant(_ context.Context, req api.GrantCheck) (api.GrantClaims, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("VerifyGrant", req.Key, false); err != nil {
		return api.GrantClaims{}, err
	}
	return api.GrantClaims{Kind: req.Kind, TargetRegion: req.TargetRegion, GrantedTo: "test-user"}, nil
}

// RecordCompensationDecision implements activities.CompensationAuditor: it journals the call.
func (r *Region) RecordCompensationDecision(_ context.Context, machine string, d api.CompensationDecision) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.enter("RecordCompensationDecision", machine+" "+d.Action+" by "+d.By, true)
}
