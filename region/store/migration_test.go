package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev/seeddata"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// drp2 is the destination's public URL in the seed.
const drp2 = "https://drp2:8092"

const birdyJobsCmd = "drpcli jobs list Machine=01d8828f-2f7d-4a1c-a1fa-f668274c7c44"

// seedAfter returns the first JSON value printed after the shell line ending in cmd that
// follows the sentence marker of the seed.
func seedAfter(t *testing.T, marker, cmd string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(seedFile)
	if err != nil {
		t.Fatalf("the migration seed is the reference of this test: %v", err)
	}
	seed := string(b)
	i := strings.Index(seed, marker)
	if i < 0 {
		t.Fatalf("seed has no %q", marker)
	}
	return seedJSON(t, seed[i:], cmd)
}

// seedList splits a JSON array of the seed into its elements.
func seedList(t *testing.T, raw json.RawMessage) []json.RawMessage {
	t.Helper()
	var l []json.RawMessage
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// sameJobs compares a job list field by field with the seed's, in order.
func sameJobs(t *testing.T, what string, want json.RawMessage, got []api.Job) {
	t.Helper()
	w := seedList(t, want)
	if len(got) != len(w) {
		t.Fatalf("%s: %d jobs, seed has %d", what, len(got), len(w))
	}
	for i := range got {
		sameFields(t, what+" job "+got[i].Uuid, w[i], json.RawMessage(jsonOf(t, got[i])))
	}
}

// region is one side of a migration in the store tests.
type region struct {
	t *testing.T
	s *store.Store
}

func newRegion(t *testing.T, profiles ...api.Profile) region {
	t.Helper()
	s, _ := newStore(t)
	for i := range profiles {
		mustCreate(t, s, api.KindProfiles, &profiles[i])
	}
	return region{t: t, s: s}
}

func (r region) machine(key string) api.Machine {
	r.t.Helper()
	var m api.Machine
	if err := r.s.Get(context.Background(), api.KindMachines, key, &m); err != nil {
		r.t.Fatalf("get machine %s: %v", key, err)
	}
	return m
}

func (r region) jobs(machine string) []api.Job {
	r.t.Helper()
	var js []api.Job
	if err := r.s.List(context.Background(), api.KindJobs, store.ListOptions{Filters: map[string]string{"Machine": machine}}, &js); err != nil {
		r.t.Fatal(err)
	}
	return js
}

func (r region) profile(name string) api.Profile {
	r.t.Helper()
	var p api.Profile
	if err := r.s.Get(context.Background(), api.KindProfiles, name, &p); err != nil {
		r.t.Fatalf("get profile %s: %v", name, err)
	}
	return p
}

// seedSource is drp1 of the seed: birdy with its two jobs (and a log), the profiles it uses,
// and a profile example-profile includes, which must travel too.
func seedSource(t *testing.T) (region, api.Machine, []api.Job) {
	t.Helper()
	src := newRegion(t,
		api.Profile{Name: "nested-profile", Params: map[string]any{"nested/param": "from-drp1"}},
		api.Profile{Name: "example-profile", Params: map[string]any{"example/param": "from-drp1"}, Profiles: []string{"nested-profile"}},
		seedProfile(t, "drp1"),
	)
	birdy, js, err := seeddata.Birdy()
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, src.s, api.KindMachines, &birdy)
	for i := range js {
		mustCreate(t, src.s, api.KindJobs, &js[i])
	}
	if err := src.s.AppendJobLog(context.Background(), alice, js[1].Uuid, "hello from birdy\n"); err != nil {
		t.Fatal(err)
	}
	return src, birdy, js
}

// seedDestination is drp2 of the seed, with its own conflicting-profile.
func seedDestination(t *testing.T) region {
	return newRegion(t, seedProfile(t, "drp2"))
}

// seedProfile is the conflicting-profile the seed shows on host (drp1 or drp2).
func seedProfile(t *testing.T, host string) api.Profile {
	t.Helper()
	var p api.Profile
	if err := json.Unmarshal(seedJSON(t, mustRead(t), "[admin@"+host+" ~]$ drpcli profiles show conflicting-profile"), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func ticketUse(id string) store.TicketUse {
	return store.TicketUse{ID: id, Expires: time.Now().Add(time.Hour)}
}

const migration = "migrate-machine/" + seeddata.BirdyUUID

// TestMigrationMatchesSeed runs quiesce, export, import and finalize and compares both
// machines and both job lists field by field with the seed's after-state, then checks that
// every step is idempotent.
func TestMigrationMatchesSeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, birdy, _ := seedSource(t)
	dst := seedDestination(t)
	id := birdy.Uuid

	q, err := src.s.Quiesce(ctx, alice, "Name:birdy", migration)
	if err != nil {
		t.Fatal(err)
	}
	if q.Runnable || q.Meta[api.MetaMigrating] != migration {
		t.Fatalf("quiesced machine: Runnable %v, Meta %v", q.Runnable, q.Meta)
	}
	bundle, err := src.s.Export(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	sameFields(t, "exported machine", seedJSON(t, mustRead(t), "[admin@drp1 ~]$ drpcli machines show Name:birdy"), json.RawMessage(jsonOf(t, bundle.Machine)))
	if got := profileNames(bundle.Profiles); got != "conflicting-profile,example-profile,nested-profile" {
		t.Fatalf("exported profiles %s", got)
	}
	if bundle.JobLogs[bundle.Jobs[1].Uuid] != "hello from birdy\n" || len(bundle.JobLogs) != 1 {
		t.Fatalf("exported logs %v", bundle.JobLogs)
	}

	imported, err := dst.s.Import(ctx, ticketUse("t-1"), bundle, drp2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.s.FinalizeMigration(ctx, alice, id, drp2); err != nil {
		t.Fatal(err)
	}

	sameFields(t, "drp2 birdy", seedAfter(t, "The machine has migrated.", "drpcli machines show Name:birdy"), json.RawMessage(jsonOf(t, dst.machine(id))))
	sameFields(t, "drp1 birdy", seedAfter(t, "where it should redirect to.", "drpcli machines show Name:birdy"), json.RawMessage(jsonOf(t, src.machine(id))))
	sameJobs(t, "drp2", seedAfter(t, "The jobs have migrated as well.", birdyJobsCmd), dst.jobs(id))
	sameJobs(t, "drp1", seedAfter(t, "The original jobs on drp1 will still exist", birdyJobsCmd), src.jobs(id))
	sameFields(t, "drp2 conflicting-profile", seedJSON(t, mustRead(t), "[admin@drp2 ~]$ drpcli profiles show conflicting-profile"),
		json.RawMessage(jsonOf(t, dst.profile("conflicting-profile"))))
	if p := dst.profile("example-profile"); p.Params["example/param"] != "from-drp1" || p.Profiles[0] != "nested-profile" {
		t.Fatalf("example-profile was not created from the source: %+v", p)
	}
	if p := dst.profile("nested-profile"); p.Params["nested/param"] != "from-drp1" {
		t.Fatalf("nested-profile was not created from the source: %+v", p)
	}
	if log, err := dst.s.JobLog(ctx, bundle.Jobs[1].Uuid); err != nil || log != "hello from birdy\n" {
		t.Fatalf("imported log %q, %v", log, err)
	}

	// Every step again: nothing changes.
	before := [2]string{jsonOf(t, src.machine(id)) + jsonOf(t, src.jobs(id)), jsonOf(t, dst.machine(id)) + jsonOf(t, dst.jobs(id))}
	if _, err := src.s.FinalizeMigration(ctx, alice, id, drp2); err != nil {
		t.Fatalf("finalize again: %v", err)
	}
	again, err := dst.s.Import(ctx, ticketUse("t-1"), bundle, drp2)
	if err != nil {
		t.Fatalf("import retried with the same ticket: %v", err)
	}
	if jsonOf(t, again) != jsonOf(t, imported) {
		t.Fatalf("retried import stored %s, first %s", jsonOf(t, again), jsonOf(t, imported))
	}
	after := [2]string{jsonOf(t, src.machine(id)) + jsonOf(t, src.jobs(id)), jsonOf(t, dst.machine(id)) + jsonOf(t, dst.jobs(id))}
	if before != after {
		t.Fatalf("repeating finalize and import changed state:\n%s\n%s", before, after)
	}
	// Export of the stub still gives the live machine, and the stub refuses another finalize.
	if b2, err := src.s.Export(ctx, id); err != nil || jsonOf(t, b2) != jsonOf(t, bundle) {
		t.Fatalf("export of the stub: %v\n%s\nwant %s", err, jsonOf(t, b2), jsonOf(t, bundle))
	}
	_, err = src.s.FinalizeMigration(ctx, alice, id, "https://elsewhere:8092")
	wantErr(t, err, store.ErrConflict, "already migrated to "+drp2)
	_, err = src.s.Quiesce(ctx, alice, id, "another")
	wantErr(t, err, store.ErrConflict, "already migrated to "+drp2)

	// The agent checks in at the inactive copy before the workflow activates it.
	if c, err := dst.s.AgentCheckin(ctx, id, api.AgentCheckin{Version: "2"}, time.Now()); err != nil || c.Runnable || c.Meta[api.MetaAgentVersion] != "2" {
		t.Fatalf("check-in at the inactive copy: %+v, %v", c.Meta, err)
	}
	m, err := dst.s.Activate(ctx, alice, id)
	if err != nil || !m.Runnable || !m.Available {
		t.Fatalf("activate: %+v, %v", m, err)
	}
	if m2, err := dst.s.Activate(ctx, alice, id); err != nil || jsonOf(t, m2) != jsonOf(t, m) {
		t.Fatalf("activate again: %v", err)
	}
	_, err = src.s.Activate(ctx, alice, id)
	wantErr(t, err, store.ErrConflict, "is a stub migrated to "+drp2)
	// Once live, the destination copy may not be replaced, even with the ticket it came with.
	_, err = dst.s.Import(ctx, ticketUse("t-1"), bundle, drp2)
	wantErr(t, err, store.ErrConflict, "a ticket imports once")

	// Deleting the stub, naming the migration that left it, removes its snapshot with it.
	if err := src.s.Delete(store.ForMigration(ctx, migration), alice, api.KindMachines, id, false); err != nil {
		t.Fatal(err)
	}
	if n := count(t, src.s, "migration_snapshots"); n != 0 {
		t.Fatalf("%d snapshots left after deleting the stub", n)
	}
}

func mustRead(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func profileNames(ps []api.Profile) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return strings.Join(names, ",")
}

func count(t *testing.T, s *store.Store, table string) int {
	t.Helper()
	var n int
	if err := s.DB().QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRestoreAndUnquiesce undoes a finalized migration step by step: restore gives back the
// machine and jobs (still quiesced), unquiesce gives back exactly the original.
func TestRestoreAndUnquiesce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, birdy, _ := seedSource(t)
	id := birdy.Uuid
	original := jsonOf(t, src.machine(id))
	originalJobs := jsonOf(t, src.jobs(id))

	if _, err := src.s.Quiesce(ctx, alice, id, migration); err != nil {
		t.Fatal(err)
	}
	quiesced := jsonOf(t, src.machine(id))
	if _, err := src.s.FinalizeMigration(ctx, alice, id, drp2); err != nil {
		t.Fatal(err)
	}
	_, err := src.s.Unquiesce(ctx, alice, id)
	wantErr(t, err, store.ErrConflict, "restore the migration before unquiescing")

	restored, err := src.s.RestoreMigration(ctx, alice, id)
	if err != nil {
		t.Fatal(err)
	}
	if jsonOf(t, restored) != quiesced {
		t.Fatalf("restored machine\n%s\nwant the quiesced one\n%s", jsonOf(t, restored), quiesced)
	}
	if got := jsonOf(t, src.jobs(id)); got != originalJobs {
		t.Fatalf("restored jobs\n%s\nwant\n%s", got, originalJobs)
	}
	if again, err := src.s.RestoreMigration(ctx, alice, id); err != nil || jsonOf(t, again) != quiesced {
		t.Fatalf("restore again: %v", err)
	}
	m, err := src.s.Unquiesce(ctx, alice, id)
	if err != nil {
		t.Fatal(err)
	}
	if jsonOf(t, m) != original {
		t.Fatalf("unquiesced machine\n%s\nwant\n%s", jsonOf(t, m), original)
	}
	if n := count(t, src.s, "migration_snapshots"); n != 0 {
		t.Fatalf("%d snapshots left after unquiesce", n)
	}
	if again, err := src.s.Unquiesce(ctx, alice, id); err != nil || jsonOf(t, again) != original {
		t.Fatalf("unquiesce without a snapshot: %v\n%s", err, jsonOf(t, again))
	}
}

// TestQuiesceRules: one migration at a time, never in WorkOrderMode, and agent reports made
// while quiesced survive unquiesce.
func TestQuiesceRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	fixtures(t, s)
	mustCreate(t, s, api.KindMachines, &api.Machine{Name: "wom", WorkOrderMode: true})
	var m1 api.Machine
	if err := s.Get(ctx, api.KindMachines, mach1, &m1); err != nil {
		t.Fatal(err)
	}
	m1.Runnable = true
	if err := s.Replace(ctx, alice, api.KindMachines, mach1, &m1); err != nil {
		t.Fatal(err)
	}

	_, err := s.Quiesce(ctx, alice, "Name:wom", migration)
	wantErr(t, err, store.ErrInvalid, "WorkOrderMode")
	_, err = s.Quiesce(ctx, alice, "Name:m1", " ")
	wantErr(t, err, store.ErrInvalid, "needs the migration")
	_, err = s.Quiesce(ctx, alice, "Name:nope", migration)
	wantErr(t, err, store.ErrNotFound, "not found")

	q, err := s.Quiesce(ctx, alice, "Name:m1", migration)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.Quiesce(ctx, alice, "Name:m1", migration); err != nil || jsonOf(t, again) != jsonOf(t, q) {
		t.Fatalf("quiesce again by the same migration: %v", err)
	}
	_, err = s.Quiesce(ctx, alice, "Name:m1", "migrate-machine/other")
	wantErr(t, err, store.ErrConflict, "already being migrated by "+migration)
	_, err = s.Activate(ctx, alice, "Name:m1")
	wantErr(t, err, store.ErrConflict, "unquiesce it instead")
	_, err = s.FinalizeMigration(ctx, alice, "Name:wom", drp2)
	wantErr(t, err, store.ErrConflict, "is not quiesced")
	_, err = s.FinalizeMigration(ctx, alice, "Name:m1", "drp2:8092")
	wantErr(t, err, store.ErrInvalid, "not an http(s) URL")

	if _, err := s.AgentCheckin(ctx, mach1, api.AgentCheckin{Version: "v2", Endpoint: "http://rack:5248"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	m, err := s.Unquiesce(ctx, alice, "Name:m1")
	if err != nil {
		t.Fatal(err)
	}
	if !m.Runnable || m.Meta[api.MetaMigrating] != "" || m.Meta[api.MetaAgentVersion] != "v2" || m.Meta[api.MetaAgentEndpoint] != "http://rack:5248" {
		t.Fatalf("unquiesced: Runnable %v Meta %v", m.Runnable, m.Meta)
	}
}

// TestImportRefusals: replayed tickets, Name and MAC clashes, live machines and bad bundles
// are refused, naming the cause, and change nothing.
func TestImportRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, birdy, _ := seedSource(t)
	bundle, err := src.s.Export(ctx, birdy.Uuid)
	if err != nil {
		t.Fatal(err)
	}
	dst := seedDestination(t)
	other := api.Machine{Uuid: "0d000000-0000-4000-8000-000000000001", Name: "other", HardwareAddrs: []string{"52:54:00:00:00:01"}}
	mustCreate(t, dst.s, api.KindMachines, &other)
	if _, err := dst.s.Import(ctx, ticketUse("spent"), api.Bundle{Machine: api.Machine{Uuid: "0d000000-0000-4000-8000-000000000002", Name: "first"}}, drp2); err != nil {
		t.Fatal(err)
	}

	with := func(change func(b *api.Bundle)) api.Bundle {
		var b api.Bundle
		if err := json.Unmarshal([]byte(jsonOf(t, bundle)), &b); err != nil {
			t.Fatal(err)
		}
		change(&b)
		return b
	}
	cases := []struct {
		name   string
		ticket string
		bundle api.Bundle
		class  error
		want   string
	}{
		{"replayed ticket", "spent", bundle, store.ErrConflict, "ticket spent was already used at"},
		{"name clash", "t-name", with(func(b *api.Bundle) { b.Machine.Name = "other" }), store.ErrConflict,
			"cannot import machine other (" + birdy.Uuid + "): Name other is used by machine " + other.Uuid},
		{"MAC clash", "t-mac", with(func(b *api.Bundle) { b.Machine.HardwareAddrs = []string{"52:54:00:00:00:01"} }), store.ErrConflict,
			"MAC 52:54:00:00:00:01 is used by machine other (" + other.Uuid + ")"},
		{"live machine with the UUID", "t-live", with(func(b *api.Bundle) {
			b.Machine.Uuid = other.Uuid
			b.Machine.Name = "other"
			b.Jobs = nil
			b.JobLogs = nil
		}),
			store.ErrConflict, "machine other (" + other.Uuid + ") already exists on this region"},
		{"job of another machine", "t-job", with(func(b *api.Bundle) { b.Jobs[0].Machine = other.Uuid }), store.ErrInvalid, "belongs to machine " + other.Uuid},
		{"log of no job", "t-log", with(func(b *api.Bundle) { b.JobLogs["0d000000-0000-4000-8000-0000000000ff"] = "x" }), store.ErrInvalid, "not one of its jobs"},
		{"stub", "t-stub", with(func(b *api.Bundle) { b.Machine.Meta[api.MetaRedirectEndpoint] = drp2 }), store.ErrInvalid, "is a stub migrated to"},
		{"not a UUID", "t-uuid", with(func(b *api.Bundle) { b.Machine.Uuid = "birdy" }), store.ErrInvalid, `Uuid "birdy" is not a UUID`},
		{"no ticket ID", "", bundle, store.ErrInvalid, "ticket has no ID"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := snapshot(t, dst.s) + jsonOf(t, count(t, dst.s, "tickets"))
			_, err := dst.s.Import(ctx, ticketUse(c.ticket), c.bundle, drp2)
			wantErr(t, err, c.class, c.want)
			if after := snapshot(t, dst.s) + jsonOf(t, count(t, dst.s, "tickets")); after != before {
				t.Fatal("a refused import changed the database")
			}
		})
	}
}

// TestImportReplacesStub: a machine migrating back to a region it left replaces its stub there;
// an inactive copy imported with an earlier ticket is replaced too.
func TestImportReplacesStub(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, birdy, _ := seedSource(t)
	id := birdy.Uuid
	if _, err := src.s.Quiesce(ctx, alice, id, migration); err != nil {
		t.Fatal(err)
	}
	bundle, err := src.s.Export(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.s.FinalizeMigration(ctx, alice, id, drp2); err != nil {
		t.Fatal(err)
	}
	bundle.Machine.Description = "came back"
	m, err := src.s.Import(ctx, ticketUse("back"), bundle, "https://drp1:8092")
	if err != nil {
		t.Fatal(err)
	}
	if m.Locked || m.Runnable || m.Available || m.Description != "came back" || m.Meta[api.MetaRedirectEndpoint] != "" || len(m.Profiles) != 2 {
		t.Fatalf("machine back on its old region: %+v", m)
	}
	js := src.jobs(id)
	if js[0].Archived || js[0].Meta[api.MetaRedirectEndpoint] != "" || js[1].Meta[api.MetaRedirectEndpoint] != "https://drp1:8092" {
		t.Fatalf("jobs back on the old region: %s", jsonOf(t, js))
	}
	// The snapshot of its departure is gone: an unquiesce now changes nothing.
	if n := count(t, src.s, "migration_snapshots"); n != 0 {
		t.Fatalf("%d stale snapshots after the machine came back", n)
	}
	if again, err := src.s.Unquiesce(ctx, alice, id); err != nil || again.Description != "came back" || again.Runnable {
		t.Fatalf("unquiesce after the return: %+v, %v", again, err)
	}
	bundle.Machine.Description = "second try"
	if m, err = src.s.Import(ctx, ticketUse("back-2"), bundle, "https://drp1:8092"); err != nil || m.Description != "second try" {
		t.Fatalf("import over the inactive copy: %v, %q", err, m.Description)
	}
}

// TestTicketKeyIsShared: every region process of a cluster gets the same key.
func TestTicketKeyIsShared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, url := newStore(t)
	keys := make([][]byte, 4)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			other, err := store.Open(ctx, url)
			if err != nil {
				t.Error(err)
				return
			}
			defer other.Close()
			if keys[i], err = other.TicketKey(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	again, err := s.TicketKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if string(k) != string(again) || len(k) != 32 {
			t.Fatalf("process %d got key %x, later call %x", i, k, again)
		}
	}
}

// TestConcurrentImportsOfOneTicket: the same ticket sent for two machines at once imports one.
func TestConcurrentImportsOfOneTicket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dst := seedDestination(t)
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			m := api.Machine{Uuid: "0e000000-0000-4000-8000-00000000000" + string(rune('1'+i)), Name: "m" + string(rune('1'+i))}
			_, err := dst.s.Import(ctx, ticketUse("one"), api.Bundle{Machine: m}, drp2)
			errs <- err
		}()
	}
	var ok, replayed int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			ok++
		case errors.Is(err, store.ErrConflict) && strings.Contains(err.Error(), "already used"):
			replayed++
		default:
			t.Fatalf("import: %v", err)
		}
	}
	if ok != 1 || replayed != 1 {
		t.Fatalf("%d imports succeeded and %d were refused as replays, want 1 and 1", ok, replayed)
	}
}

// TestConcurrentImportsIntoANewPool: machines of one pool the destination lacks, imported at
// the same time (a rack transfer's window), all land; the pool is created once.
func TestConcurrentImportsIntoANewPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	const n = 6
	errs := concurrently(n, func(i int) error {
		m := api.Machine{
			Uuid: fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1), Name: fmt.Sprintf("node-%d", i),
			Pool: "gold", HardwareAddrs: []string{fmt.Sprintf("52:54:00:00:10:%02x", i)},
		}
		_, err := s.Import(ctx, ticketUse(fmt.Sprintf("pool-%d", i)), api.Bundle{Machine: m}, "https://drp2:8092")
		return err
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("import %d: %v", i, err)
		}
	}
	var ms []api.Machine
	if err := s.List(ctx, api.KindMachines, store.ListOptions{Filters: map[string]string{"Pool": "gold"}}, &ms); err != nil || len(ms) != n {
		t.Fatalf("%d machines in pool gold, %v; want %d", len(ms), err, n)
	}
}
