// Package regiontest is an in-memory region that follows the migration contract of
// region/api/migration.go (the semantics of region/store/migration.go), for testing
// activities and workflows without PostgreSQL. It records every call and can be told to fail
// calls with an HTTP status. contract_test.go runs the same cases against it and a real
// region server, so the two cannot drift.
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
	images    map[string]string      // OS images' SHA-256 by name
	snapshots map[string]snapshot    // by machine UUID, taken at quiesce
	tickets   map[string]*ticket     // by token
	minted    int                    // tickets minted so far
	racks     map[string]*rackState  // by UUID
	ops       []*pendingOp           // queued rack operations, oldest first
	opSeq     int64
	fences    map[string]fence   // by machine UUID
	failures  map[string]failure // by method name
	holds     map[string]*hold   // by method name: the next call waits for its release
	checks    []api.GrantCheck   // the grant checks asked, in order
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

// snapshot is a machine and its jobs as they were before migration quiesced it.
type snapshot struct {
	migration string
	machine   api.Machine
	jobs      []api.Job
}

// ticket is a minted ticket: unused, spent on the import of machine, or closed (the import
// completed or was undone), as the region's tickets table.
type ticket struct {
	id        string
	machine   string // "" until spent
	migration string // the import's migration
	closed    bool
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
		images:    map[string]string{},
		snapshots: map[string]snapshot{},
		tickets:   map[string]*ticket{},
		racks:     map[string]*rackState{},
		fences:    map[string]fence{},
		failures:  map[string]failure{},
		holds:     map[string]*hold{},
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

// PutImages stores the metadata of OS images (region/store/images.go): what a move checks.
func (r *Region) PutImages(images ...api.ImageRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, img := range images {
		r.images[img.Name] = img.SHA256
	}
}

// missingImage says which image a machine moving here is deployed with that this region
// lacks under that name with that SHA-256, as the store's missingImages.
func (r *Region) missingImage(machine string, img *api.ImageRef) (string, bool) {
	if img == nil || r.images[img.Name] == img.SHA256 {
		return "", false
	}
	return fmt.Sprintf("machine %s is deployed with image %s (SHA-256 %s), which this region lacks: upload it here first (ironflow images upload %s FILE)",
		machine, img.Name, img.SHA256, img.Name), true
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

// hold is a call of a method that waits until a test releases it.
type hold struct {
	held, release chan struct{}
}

// Hold makes the next call of method wait, before it takes effect, until release is called;
// held is closed once that call waits. A test lands a step's answer after other calls with it
// (e.g. after a cancel's undos started).
func (r *Region) Hold(method string) (held <-chan struct{}, release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := &hold{held: make(chan struct{}), release: make(chan struct{})}
	r.holds[method] = h
	var once sync.Once
	return h.held, func() { once.Do(func() { close(h.release) }) }
}

// waitIfHeld makes a call of method wait while a test holds it. It runs before the call
// takes the region's lock, so other calls go on meanwhile.
func (r *Region) waitIfHeld(method string) {
	r.mu.Lock()
	h := r.holds[method]
	delete(r.holds, method)
	r.mu.Unlock()
	if h != nil {
		close(h.held)
		<-h.release
	}
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

// DeleteMachine implements activities.Region: a machine a migration holds is deleted only
// for that migration, and its import's tickets close.
func (r *Region) DeleteMachine(ctx context.Context, key, migration string) error {
	_, err := onMachine(r, "DeleteMachine", key, func(m api.Machine) (struct{}, error) {
		if held := r.holder(m); held != "" && held != migration {
			return struct{}{}, apiErr(http.StatusConflict, "machine %s (%s) is held by migration %s and cannot be deleted while that migration may still need it", m.Name, m.Uuid, held)
		}
		if migration == "" && client.AttemptOf(ctx).IsZero() {
			delete(r.fences, m.Uuid) // an operator's delete: the machine is gone for good
		}
		return fenced(ctx, r, m, migration, func() (struct{}, error) {
			r.closeTickets(m.Uuid)
			r.remove(m.Uuid)
			return struct{}{}, nil
		})
	})
	return err
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
	r.checks = append(r.checks, req)
	return api.GrantClaims{Kind: req.Kind, TargetRegion: req.TargetRegion, GrantedTo: "test-user"}, nil
}

// GrantChecks returns the grant checks the region answered, in order.
func (r *Region) GrantChecks() []api.GrantCheck {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.checks)
}

// RecordCompensationDecision implements activities.CompensationAuditor: it journals the call.
func (r *Region) RecordCompensationDecision(_ context.Context, machine string, d api.CompensationDecision) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.enter("RecordCompensationDecision", machine+" "+d.Action+" by "+d.By, true)
}

// RecordMoveControl implements activities.MoveControlAuditor: it refuses what the region's
// store refuses and journals the call.
func (r *Region) RecordMoveControl(_ context.Context, c api.MoveControl) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains([]string{"pause", "resume", "set-window"}, c.Action) || (c.Action == "set-window") != (c.Window > 0) || c.Migration == "" || c.By == "" {
		return apiErr(http.StatusUnprocessableEntity, "move control %+v refused", c)
	}
	return r.enter("RecordMoveControl", fmt.Sprintf("%s %s %d by %s", c.Migration, c.Action, c.Window, c.By), true)
}
