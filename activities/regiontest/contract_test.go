package regiontest_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/regiontest"
	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/region/server"
	"github.com/ironflow/ironflow/region/store"
)

// The migration contract: one table of cases, each run against two fake regions and against
// two region servers on PostgreSQL, so the fake the activity and workflow tests use cannot
// drift from the region it stands in for. A case that fails only for "fake" means the fake
// must change; one that fails only for "real" means the region broke the contract the
// activities rely on.

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	migration = "migrate-machine/" + machineUUID
	other     = "migrate-machine/other"

	machineUUID = "3f2a1c9e-8b7d-4e6f-9a1b-2c3d4e5f6a7b"
	currentJob  = "5a6b7c8d-1e2f-4a3b-8c9d-0e1f2a3b4c5d"
	doneJob     = "6b7c8d9e-2f3a-4b4c-9d0e-1f2a3b4c5d6e"
	unknownUUID = "00000000-0000-4000-8000-0000000000ff"

	rackUUID      = "aaaaaaaa-0000-4000-8000-00000000000a"
	otherRackUUID = "aaaaaaaa-0000-4000-8000-00000000000b"
)

func rackA() api.Rack {
	return api.Rack{Uuid: rackUUID, Name: "rack-a", Status: api.RackOnline, RegionEndpoints: []string{"https://region-a.example:5240"}}
}

// region is one region under contract: what the activities call, and how a case puts
// objects into it as they are.
type region struct {
	activities.Region
	rack       activities.RackRegion
	name, url  string
	putMachine func(t *testing.T, m api.Machine)
	putJob     func(t *testing.T, j api.Job)
	putProfile func(t *testing.T, p api.Profile)
	putRack    func(t *testing.T, r api.Rack)
	putImage   func(t *testing.T, img api.ImageRef)
	queueOp    func(t *testing.T, rack string, op api.PendingOperation)
}

// pair is a source and a target region of one implementation.
type pair struct{ src, dst region }

var implementations = []struct {
	name    string
	regions func(t *testing.T) pair
}{
	{"fake", fakePair},
	{"real", realPair},
}

func fakePair(*testing.T) pair {
	journal := &regiontest.Journal{}
	fake := func(name string) region {
		url := "https://" + name + ".example:5240"
		r := regiontest.New(name, url, journal)
		return region{
			Region: r, rack: r, name: name, url: url,
			putMachine: func(_ *testing.T, m api.Machine) { r.Put(m) },
			putJob:     func(_ *testing.T, j api.Job) { r.PutJobs(j) },
			putProfile: func(_ *testing.T, p api.Profile) { r.PutProfiles(p) },
			putRack:    func(_ *testing.T, rack api.Rack) { r.PutRack(rack, api.RackBundle{}) },
			putImage:   func(_ *testing.T, img api.ImageRef) { r.PutImages(img) },
			queueOp: func(t *testing.T, rack string, op api.PendingOperation) {
				if _, err := r.QueueRackOperation(ctx, rack, op); err != nil {
					t.Fatal(err)
				}
			},
		}
	}
	return pair{fake("region-a"), fake("region-b")}
}

func realPair(t *testing.T) pair {
	return pair{realRegion(t, "region-a"), realRegion(t, "region-b")}
}

// realRegion serves a fresh database over HTTP on loopback, reached as the workers reach it:
// an admin token, its calls marked as the move's.
func realRegion(t *testing.T, name string) region {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	token, _, err := st.BootstrapAdmin(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := server.New(st, server.Config{Name: name, PublicURL: url, Version: "contract", Logger: logger})
	serveCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(serveCtx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	c := activities.ClientRegion{Client: client.New(url, token, client.AsMove())} // as the workers reach regions
	admin := store.Principal{User: "contract", Role: api.RoleAdmin}
	return region{
		Region: c, rack: c, name: name, url: url,
		putMachine: func(t *testing.T, m api.Machine) { create(t, c.Machines(), m) },
		putJob:     func(t *testing.T, j api.Job) { create(t, c.Jobs(), j) },
		putProfile: func(t *testing.T, p api.Profile) { create(t, c.Profiles(), p) },
		// Racks create themselves by registering: the store puts them as they are.
		putRack: func(t *testing.T, r api.Rack) {
			if err := st.Create(ctx, admin, api.KindRacks, &r); err != nil {
				t.Fatal(err)
			}
		},
		queueOp: func(t *testing.T, rack string, op api.PendingOperation) {
			if err := st.QueueRackOperation(ctx, admin, rack, &op); err != nil {
				t.Fatal(err)
			}
		},
		// The metadata is what a move checks; the bytes stay out of the contract.
		putImage: func(t *testing.T, img api.ImageRef) {
			meta := api.Image{Name: img.Name, Arch: "amd64", Format: "raw", Compression: "none", SHA256: img.SHA256}
			if _, _, err := st.CreateImage(ctx, admin, meta, func() error { return nil }); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func create[T any](t *testing.T, r client.Resource[T], obj T) {
	t.Helper()
	if _, err := r.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T: %v", obj, err)
	}
}

// seed puts the machine of the cases on r: live, with a finished and a current job and a
// profile.
func seed(t *testing.T, r region) api.Machine {
	t.Helper()
	r.putProfile(t, api.Profile{Name: "rack-profile", Params: map[string]any{"ntp": "10.0.0.1"}})
	m := api.Machine{
		Uuid: machineUUID, Name: "birdy", Runnable: true, Available: true,
		HardwareAddrs: []string{"52:54:00:aa:bb:cc"}, Profiles: []string{"rack-profile"},
		BootEnv: "sledgehammer", Stage: "hello-world", Workflow: "hello-world", CurrentJob: currentJob,
		Meta: map[string]string{"feature-flags": "change-stage-v2", "machine-role": "machine"},
	}
	r.putMachine(t, m)
	r.putJob(t, api.Job{Uuid: doneJob, Machine: machineUUID, State: api.JobFinished, Task: "stage:hello-world"})
	r.putJob(t, api.Job{Uuid: currentJob, Machine: machineUUID, State: api.JobRunning, Task: "hello-world", Current: true})
	got, err := r.GetMachine(context.Background(), machineUUID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// contractCase is one behaviour of the contract.
type contractCase struct {
	name string
	run  func(t *testing.T, p pair)
}

func TestRegionContract(t *testing.T) {
	for _, impl := range implementations {
		t.Run(impl.name, func(t *testing.T) {
			for _, c := range contract {
				t.Run(c.name, func(t *testing.T) { c.run(t, impl.regions(t)) })
			}
		})
	}
}

var ctx = context.Background()

// status is the HTTP status of a region's refusal; 0 for no error, -1 for another error.
func status(err error) int {
	var apiErr *client.APIError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &apiErr):
		return apiErr.StatusCode
	}
	return -1
}

func wantStatus(t *testing.T, what string, err error, want int) {
	t.Helper()
	if got := status(err); got != want {
		t.Errorf("%s: status %d (%v), want %d", what, got, err, want)
	}
}

func must[T any](t *testing.T, what string) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

func getMachine(t *testing.T, r region) api.Machine {
	t.Helper()
	return must[api.Machine](t, "get machine on "+r.name)(r.GetMachine(ctx, machineUUID))
}

func getJob(t *testing.T, r region, id string) api.Job {
	t.Helper()
	return must[api.Job](t, "get job "+id+" on "+r.name)(r.GetJob(ctx, id))
}

// quiesced seeds src and quiesces the machine for migration.
func quiesced(t *testing.T, p pair) api.Machine {
	t.Helper()
	seed(t, p.src)
	return must[api.Machine](t, "quiesce")(p.src.Quiesce(ctx, machineUUID, api.QuiesceRequest{Migration: migration}))
}

// copied quiesces the machine on src and imports its bundle into dst for migration.
func copied(t *testing.T, p pair) api.Ticket {
	t.Helper()
	quiesced(t, p)
	ticket := must[api.Ticket](t, "mint ticket")(p.dst.MintTicket(ctx, api.TicketRequest{}))
	b := must[api.Bundle](t, "export")(p.src.Export(ctx, machineUUID))
	must[api.Machine](t, "import")(p.dst.Import(ctx, api.ImportRequest{Ticket: ticket.Token, Bundle: b, Migration: migration}))
	return ticket
}

// finalized copies the machine and turns the source into a stub redirecting to dst.
func finalized(t *testing.T, p pair) api.Ticket {
	t.Helper()
	ticket := copied(t, p)
	must[api.Machine](t, "finalize")(p.src.FinalizeMigrationFor(ctx, machineUUID, migration, api.FinalizeRequest{RedirectEndpoint: p.dst.url}))
	return ticket
}

// worker is the activities over the pair, found by name or URL.
func worker(t *testing.T, p pair) *activities.Activities {
	t.Helper()
	byURL := map[string]activities.Region{p.src.url: p.src.Region, p.dst.url: p.dst.Region}
	regions, err := activities.NewRegions(map[string]activities.RegionConfig{
		p.src.name: {URL: p.src.url, Token: "unused"},
		p.dst.name: {URL: p.dst.url, Token: "unused"},
	}, func(rc activities.RegionConfig) activities.Region { return byURL[rc.URL] })
	if err != nil {
		t.Fatal(err)
	}
	return &activities.Activities{Regions: regions}
}

// fenceBase is the start of the first attempt of the fencing cases.
var fenceBase = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

// attemptCtx is a context of attempt number n, started after fenceBase.
func attemptCtx(n int32, after time.Duration) context.Context {
	return client.ForAttempt(ctx, api.Attempt{Started: fenceBase.Add(after), Number: n})
}

// wantStale checks that err is a region's refusal of a stale attempt: a 409 the client tells
// apart, and that the activities make StaleAttempt.
func wantStale(t *testing.T, what string, err error) {
	t.Helper()
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || !apiErr.StaleAttempt() {
		t.Errorf("%s: %v, want a 409 refusing a stale attempt", what, err)
	}
}

func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

var contract = []contractCase{
	{"a move control is audited on the source; a malformed one is refused", func(t *testing.T, p pair) {
		in := activities.MoveControlAuditInput{Region: p.src.name, Control: api.MoveControl{Migration: "bulk-migrate/nightly", Action: "set-window", Window: 7, By: "bob"}}
		if err := worker(t, p).AuditMoveControl(ctx, in); err != nil {
			t.Errorf("audit: %v", err)
		}
		auditor := p.src.Region.(activities.MoveControlAuditor)
		wantStatus(t, "set-window without a window", auditor.RecordMoveControl(ctx, api.MoveControl{Migration: "bulk-migrate/nightly", Action: "set-window", By: "bob"}), http.StatusUnprocessableEntity)
		wantStatus(t, "an unknown action", auditor.RecordMoveControl(ctx, api.MoveControl{Migration: "bulk-migrate/nightly", Action: "stop", By: "bob"}), http.StatusUnprocessableEntity)
	}},
	{"quiesce holds the machine for its migration", func(t *testing.T, p pair) {
		m := quiesced(t, p)
		if m.Runnable || m.Meta[api.MetaMigrating] != migration {
			t.Errorf("quiesced machine: Runnable %v, migrating %q", m.Runnable, m.Meta[api.MetaMigrating])
		}
		again, err := p.src.Quiesce(ctx, machineUUID, api.QuiesceRequest{Migration: migration})
		wantStatus(t, "quiesce again for the same migration", err, 0)
		if again.Meta[api.MetaMigrating] != migration {
			t.Errorf("quiesce again: %+v", again)
		}
		_, err = p.src.Quiesce(ctx, machineUUID, api.QuiesceRequest{Migration: other})
		wantStatus(t, "quiesce for another migration", err, http.StatusConflict)
		wantStatus(t, "delete without the migration", p.src.DeleteMachine(ctx, machineUUID, ""), http.StatusConflict)
		wantStatus(t, "delete for another migration", p.src.DeleteMachine(ctx, machineUUID, other), http.StatusConflict)
		wantStatus(t, "delete for its migration", p.src.DeleteMachine(ctx, machineUUID, migration), 0)
	}},
	{"quiesce refuses what it cannot hold", func(t *testing.T, p pair) {
		seed(t, p.src)
		_, err := p.src.Quiesce(ctx, machineUUID, api.QuiesceRequest{})
		wantStatus(t, "quiesce without a migration", err, http.StatusUnprocessableEntity)
		_, err = p.src.Quiesce(ctx, unknownUUID, api.QuiesceRequest{Migration: migration})
		wantStatus(t, "quiesce of no machine", err, http.StatusNotFound)
		p.src.putMachine(t, api.Machine{Uuid: unknownUUID, Name: "wom", WorkOrderMode: true})
		_, err = p.src.Quiesce(ctx, unknownUUID, api.QuiesceRequest{Migration: migration})
		wantStatus(t, "quiesce in WorkOrderMode", err, http.StatusUnprocessableEntity)
	}},
	{"unquiesce gives back Runnable and Meta, then changes nothing", func(t *testing.T, p pair) {
		quiesced(t, p)
		m := must[api.Machine](t, "unquiesce")(p.src.UnquiesceFor(ctx, machineUUID, migration))
		if !m.Runnable || m.Meta[api.MetaMigrating] != "" || m.Meta["machine-role"] != "machine" {
			t.Errorf("unquiesced machine: Runnable %v, Meta %v", m.Runnable, m.Meta)
		}
		again := must[api.Machine](t, "unquiesce without a snapshot")(p.src.UnquiesceFor(ctx, machineUUID, migration))
		if !again.Runnable {
			t.Errorf("second unquiesce: %+v", again)
		}
		wantStatus(t, "delete once released", p.src.DeleteMachine(ctx, machineUUID, ""), 0)
	}},
	{"export is the machine before quiesce, its jobs and profiles", func(t *testing.T, p pair) {
		quiesced(t, p)
		b := must[api.Bundle](t, "export")(p.src.Export(ctx, machineUUID))
		if !b.Machine.Runnable || b.Machine.Meta[api.MetaMigrating] != "" {
			t.Errorf("exported machine: Runnable %v, Meta %v", b.Machine.Runnable, b.Machine.Meta)
		}
		if len(b.Jobs) != 2 || len(b.Profiles) != 1 || b.Profiles[0].Name != "rack-profile" {
			t.Errorf("bundle has %d jobs and profiles %+v", len(b.Jobs), b.Profiles)
		}
		_, err := p.src.Export(ctx, unknownUUID)
		wantStatus(t, "export of no machine", err, http.StatusNotFound)
	}},
	{"import arrives inactive, held by its migration, and may be retried", func(t *testing.T, p pair) {
		ticket := copied(t, p)
		m := getMachine(t, p.dst)
		if m.Runnable || m.Available || m.Meta[api.MetaMigrating] != "" {
			t.Errorf("imported copy: Runnable %v Available %v Meta %v", m.Runnable, m.Available, m.Meta)
		}
		if j := getJob(t, p.dst, currentJob); j.Meta[api.MetaRedirectEndpoint] != p.dst.url {
			t.Errorf("the copy's current job points at %q, want the target %s", j.Meta[api.MetaRedirectEndpoint], p.dst.url)
		}
		b := must[api.Bundle](t, "export")(p.src.Export(ctx, machineUUID))
		_, err := p.dst.Import(ctx, api.ImportRequest{Ticket: ticket.Token, Bundle: b, Migration: migration})
		wantStatus(t, "the same import again", err, 0)
		wantStatus(t, "delete of the copy without its migration", p.dst.DeleteMachine(ctx, machineUUID, ""), http.StatusConflict)
		robin := b
		robin.Machine.Uuid, robin.Machine.Name, robin.Machine.HardwareAddrs, robin.Jobs = unknownUUID, "robin", nil, nil
		_, err = p.dst.Import(ctx, api.ImportRequest{Ticket: ticket.Token, Bundle: robin, Migration: other})
		wantStatus(t, "the ticket for another machine", err, http.StatusConflict)
		wantStatus(t, "delete of the copy for its migration", p.dst.DeleteMachine(ctx, machineUUID, migration), 0)
	}},
	{"import refuses tickets and names it must not take", func(t *testing.T, p pair) {
		seed(t, p.src)
		b := must[api.Bundle](t, "export")(p.src.Export(ctx, machineUUID))
		foreign := must[api.Ticket](t, "mint on the source")(p.src.MintTicket(ctx, api.TicketRequest{}))
		_, err := p.dst.Import(ctx, api.ImportRequest{Ticket: foreign.Token, Bundle: b})
		wantStatus(t, "a ticket of another region", err, http.StatusForbidden)
		_, err = p.dst.Import(ctx, api.ImportRequest{Ticket: "forged", Bundle: b})
		wantStatus(t, "a forged ticket", err, http.StatusUnauthorized)
		p.dst.putMachine(t, api.Machine{Uuid: unknownUUID, Name: "birdy"})
		ticket := must[api.Ticket](t, "mint")(p.dst.MintTicket(ctx, api.TicketRequest{}))
		_, err = p.dst.Import(ctx, api.ImportRequest{Ticket: ticket.Token, Bundle: b})
		wantStatus(t, "a name used by another machine", err, http.StatusConflict)
		// The refused import did not spend the ticket.
		wantStatus(t, "delete of the other machine", p.dst.DeleteMachine(ctx, unknownUUID, ""), 0)
		p.dst.putMachine(t, api.Machine{Uuid: unknownUUID, Name: "holder", Address: "10.0.0.5"})
		addressed := b
		addressed.Machine.Address = "10.0.0.5"
		_, err = p.dst.Import(ctx, api.ImportRequest{Ticket: ticket.Token, Bundle: addressed})
		wantStatus(t, "an address another machine holds", err, http.StatusConflict)
		wantStatus(t, "delete of the address holder", p.dst.DeleteMachine(ctx, unknownUUID, ""), 0)
		_, err = p.dst.Import(ctx, api.ImportRequest{Ticket: ticket.Token, Bundle: b})
		wantStatus(t, "import with the unspent ticket", err, 0)
	}},
	{"a machine deployed with an image moves only to a region holding that image", func(t *testing.T, p pair) {
		seed(t, p.src)
		deployed := api.ImageRef{Name: "debian-12", SHA256: strings.Repeat("ab", 32)}
		b := must[api.Bundle](t, "export")(p.src.Export(ctx, machineUUID))
		b.Machine.Image = &deployed
		p.dst.putImage(t, api.ImageRef{Name: deployed.Name, SHA256: strings.Repeat("cd", 32)}) // the name, other bytes
		ticket := must[api.Ticket](t, "mint")(p.dst.MintTicket(ctx, api.TicketRequest{}))
		_, err := p.dst.Import(ctx, api.ImportRequest{Ticket: ticket.Token, Bundle: b})
		wantStatus(t, "an import lacking the machine's image", err, http.StatusConflict)
		if err == nil || !strings.Contains(err.Error(), "deployed with image debian-12") {
			t.Errorf("the refusal does not name the image: %v", err)
		}
		rb := api.RackBundle{Rack: rackA(), Machines: []api.RackMachine{{Uuid: machineUUID, Name: "birdy", HardwareAddrs: []string{}, Image: &deployed}}}
		check := must[api.TransferCheck](t, "check")(p.dst.rack.CheckRackImport(ctx, rb))
		if len(check.Conflicts) != 1 || !strings.Contains(check.Conflicts[0], "deployed with image debian-12") {
			t.Errorf("rack import check lacking the image: %q", check.Conflicts)
		}
		p.dst.putImage(t, api.ImageRef{Name: "debian-12-new", SHA256: deployed.SHA256})
		deployed.Name = "debian-12-new"
		if check := must[api.TransferCheck](t, "check")(p.dst.rack.CheckRackImport(ctx, rb)); len(check.Conflicts) != 0 {
			t.Errorf("rack import check holding the image: %q", check.Conflicts)
		}
		b.Machine.Image = &deployed
		_, err = p.dst.Import(ctx, api.ImportRequest{Ticket: ticket.Token, Bundle: b})
		wantStatus(t, "an import holding the machine's image", err, 0)
	}},
	{"activate makes the copy live and closes its ticket", func(t *testing.T, p pair) {
		ticket := copied(t, p)
		_, err := p.src.ActivateFor(ctx, machineUUID, migration)
		wantStatus(t, "activate the quiesced source", err, http.StatusConflict)
		m := must[api.Machine](t, "activate")(p.dst.ActivateFor(ctx, machineUUID, migration))
		if !m.Runnable || !m.Available {
			t.Errorf("activated: Runnable %v Available %v", m.Runnable, m.Available)
		}
		_, err = p.dst.ActivateFor(ctx, machineUUID, migration)
		wantStatus(t, "activate again", err, 0)
		b := must[api.Bundle](t, "export")(p.src.Export(ctx, machineUUID))
		_, err = p.dst.Import(ctx, api.ImportRequest{Ticket: ticket.Token, Bundle: b, Migration: migration})
		wantStatus(t, "import with the ticket of a completed import", err, http.StatusConflict)
		wantStatus(t, "delete of the live machine", p.dst.DeleteMachine(ctx, machineUUID, ""), 0)
		_, err = p.dst.ActivateFor(ctx, machineUUID, migration)
		wantStatus(t, "activate no machine", err, http.StatusNotFound)
	}},
	{"a step for another migration is refused on what this one holds", func(t *testing.T, p pair) {
		copied(t, p)
		_, err := p.dst.ActivateFor(ctx, machineUUID, other)
		wantStatus(t, "activate the copy for another migration", err, http.StatusConflict)
		_, err = p.src.FinalizeMigrationFor(ctx, machineUUID, other, api.FinalizeRequest{RedirectEndpoint: p.dst.url})
		wantStatus(t, "finalize for another migration", err, http.StatusConflict)
		_, err = p.src.UnquiesceFor(ctx, machineUUID, other)
		wantStatus(t, "unquiesce for another migration", err, http.StatusConflict)
		must[api.Machine](t, "finalize")(p.src.FinalizeMigrationFor(ctx, machineUUID, migration, api.FinalizeRequest{RedirectEndpoint: p.dst.url}))
		_, err = p.src.RestoreMigrationFor(ctx, machineUUID, other)
		wantStatus(t, "restore the stub for another migration", err, http.StatusConflict)
		if m := getMachine(t, p.dst); m.Runnable {
			t.Errorf("copy went live: %+v", m)
		}
		if m := getMachine(t, p.src); m.Meta[api.MetaRedirectEndpoint] != p.dst.url {
			t.Errorf("source after refused steps: %+v, want the stub redirecting to the target", m)
		}
		must[api.Machine](t, "activate for its migration")(p.dst.ActivateFor(ctx, machineUUID, migration))
		_, err = p.dst.ActivateFor(ctx, machineUUID, other)
		wantStatus(t, "activate a live machine again, whoever asks", err, 0)
	}},
	{"finalize leaves a locked stub redirecting to the target", func(t *testing.T, p pair) {
		finalized(t, p)
		p.src.putMachine(t, api.Machine{Uuid: unknownUUID, Name: "robin"})
		_, err := p.src.FinalizeMigrationFor(ctx, unknownUUID, migration, api.FinalizeRequest{RedirectEndpoint: p.dst.url})
		wantStatus(t, "finalize a machine not quiesced", err, http.StatusConflict)
		m := getMachine(t, p.src)
		if !m.Locked || m.Runnable || m.Meta[api.MetaRedirectEndpoint] != p.dst.url || m.Meta[api.MetaMigrating] != "" ||
			m.Meta["feature-flags"] != "change-stage-v2" || m.Meta["machine-role"] != "" || len(m.Profiles) != 0 || m.CurrentJob != "" {
			t.Errorf("stub: %+v", m)
		}
		if j := getJob(t, p.src, doneJob); !j.Archived || j.Meta[api.MetaRedirectEndpoint] != p.dst.url {
			t.Errorf("finished job on the stub: Archived %v, Meta %v", j.Archived, j.Meta)
		}
		if j := getJob(t, p.src, currentJob); j.Archived || j.Meta[api.MetaRedirectEndpoint] != p.dst.url {
			t.Errorf("current job on the stub: Archived %v, Meta %v", j.Archived, j.Meta)
		}
		_, err = p.src.FinalizeMigrationFor(ctx, machineUUID, migration, api.FinalizeRequest{RedirectEndpoint: p.dst.url})
		wantStatus(t, "finalize again", err, 0)
		_, err = p.src.FinalizeMigrationFor(ctx, machineUUID, migration, api.FinalizeRequest{RedirectEndpoint: "https://elsewhere.example:5240"})
		wantStatus(t, "finalize to elsewhere", err, http.StatusConflict)
		_, err = p.src.Quiesce(ctx, machineUUID, api.QuiesceRequest{Migration: other})
		wantStatus(t, "quiesce the stub", err, http.StatusConflict)
		_, err = p.src.UnquiesceFor(ctx, machineUUID, migration)
		wantStatus(t, "unquiesce the stub", err, http.StatusConflict)
		_, err = p.src.ActivateFor(ctx, machineUUID, migration)
		wantStatus(t, "activate the stub", err, http.StatusConflict)
		b := must[api.Bundle](t, "export the stub")(p.src.Export(ctx, machineUUID))
		if b.Machine.Locked || !b.Machine.Runnable || len(b.Jobs) != 2 || b.Jobs[0].Archived || b.Jobs[1].Archived {
			t.Errorf("the stub exports %+v with jobs %+v, want the live machine and jobs", b.Machine, b.Jobs)
		}
		wantStatus(t, "delete the stub without its migration", p.src.DeleteMachine(ctx, machineUUID, ""), http.StatusConflict)
	}},
	{"restore brings the machine back from the stub, still quiesced", func(t *testing.T, p pair) {
		finalized(t, p)
		m := must[api.Machine](t, "restore")(p.src.RestoreMigrationFor(ctx, machineUUID, migration))
		if m.Locked || m.Runnable || m.Meta[api.MetaMigrating] != migration || m.Meta[api.MetaRedirectEndpoint] != "" || len(m.Profiles) != 1 {
			t.Errorf("restored: %+v", m)
		}
		if j := getJob(t, p.src, doneJob); j.Archived || j.Meta[api.MetaRedirectEndpoint] != "" {
			t.Errorf("restored finished job: Archived %v, Meta %v", j.Archived, j.Meta)
		}
		again := must[api.Machine](t, "restore what is no stub")(p.src.RestoreMigrationFor(ctx, machineUUID, migration))
		if again.Meta[api.MetaMigrating] != migration {
			t.Errorf("second restore: %+v", again)
		}
		if m := must[api.Machine](t, "unquiesce")(p.src.UnquiesceFor(ctx, machineUUID, migration)); !m.Runnable {
			t.Errorf("unquiesced after restore: %+v", m)
		}
	}},
	{"a machine coming back imports over its own stub", func(t *testing.T, p pair) {
		// The machine went dst -> src earlier: dst holds its stub, src the live machine.
		seed(t, p.dst)
		must[api.Machine](t, "quiesce on dst")(p.dst.Quiesce(ctx, machineUUID, api.QuiesceRequest{Migration: other}))
		must[api.Machine](t, "finalize on dst")(p.dst.FinalizeMigrationFor(ctx, machineUUID, other, api.FinalizeRequest{RedirectEndpoint: p.src.url}))
		copied(t, p)
		m := getMachine(t, p.dst)
		if m.Locked || m.Runnable || m.Meta[api.MetaRedirectEndpoint] != "" || len(m.Profiles) != 1 {
			t.Errorf("copy over the stub: %+v", m)
		}
		// The stub's snapshot is gone: nothing stale comes back.
		if m := must[api.Machine](t, "unquiesce the copy")(p.dst.UnquiesceFor(ctx, machineUUID, migration)); m.Runnable {
			t.Errorf("unquiesce of the copy made it live: %+v", m)
		}
	}},
	{"undo copy deletes the copy, or redirects it back, never the last copy", func(t *testing.T, p pair) {
		a := worker(t, p)
		refs := activities.UndoCopyInput{
			Source: activities.MachineRef{Region: p.src.name, Machine: machineUUID, Migration: migration},
			Target: activities.MachineRef{Region: p.dst.name, Machine: machineUUID, Migration: migration},
		}
		copied(t, p)
		if err := a.UndoCopy(ctx, refs); err != nil {
			t.Fatal(err)
		}
		if _, err := p.dst.GetMachine(ctx, machineUUID); status(err) != http.StatusNotFound {
			t.Errorf("copy after the undo: %v", err)
		}
		if err := a.UndoCopy(ctx, refs); err != nil {
			t.Errorf("undo again: %v", err)
		}
	}},
	{"undo copy after the agent moved leaves a stub redirecting back", func(t *testing.T, p pair) {
		a := worker(t, p)
		finalized(t, p)
		in := activities.UndoCopyInput{
			Source:       activities.MachineRef{Region: p.src.name, Machine: machineUUID, Migration: migration},
			Target:       activities.MachineRef{Region: p.dst.name, Machine: machineUUID, Migration: migration},
			RedirectBack: true,
		}
		if err := a.UndoCopy(ctx, in); errorType(err) != activities.ErrLastCopy {
			t.Errorf("undo while the source is a stub: %v, want %s", err, activities.ErrLastCopy)
		}
		must[api.Machine](t, "restore")(p.src.RestoreMigrationFor(ctx, machineUUID, migration))
		if err := a.UndoCopy(ctx, in); err != nil {
			t.Fatal(err)
		}
		m := getMachine(t, p.dst)
		if !m.Locked || m.Meta[api.MetaRedirectEndpoint] != p.src.url {
			t.Errorf("target after the undo: %+v", m)
		}
		if j := getJob(t, p.dst, currentJob); !j.Archived || j.Meta[api.MetaRedirectEndpoint] != p.src.url {
			t.Errorf("the redirected copy's current job: Archived %v, Meta %v", j.Archived, j.Meta)
		}
		if err := a.UndoCopy(ctx, in); err != nil {
			t.Errorf("undo again: %v", err)
		}
	}},
	{"redirect copy only undoes an inactive import, for its migration", func(t *testing.T, p pair) {
		seed(t, p.dst)
		_, err := p.dst.RedirectCopy(ctx, machineUUID, api.RedirectCopyRequest{RedirectEndpoint: p.src.url, Migration: migration})
		wantStatus(t, "redirect a live machine", err, http.StatusConflict)
		p.dst.putMachine(t, api.Machine{Uuid: unknownUUID, Name: "never-imported"})
		_, err = p.dst.RedirectCopy(ctx, unknownUUID, api.RedirectCopyRequest{RedirectEndpoint: p.src.url, Migration: migration})
		wantStatus(t, "redirect a machine never imported", err, http.StatusConflict)
		wantStatus(t, "delete the live machine", p.dst.DeleteMachine(ctx, machineUUID, ""), 0)
		copied(t, p)
		_, err = p.dst.RedirectCopy(ctx, machineUUID, api.RedirectCopyRequest{RedirectEndpoint: p.src.url, Migration: other})
		wantStatus(t, "redirect for another migration", err, http.StatusConflict)
		_, err = p.dst.RedirectCopy(ctx, "00000000-0000-4000-8000-0000000000fe", api.RedirectCopyRequest{RedirectEndpoint: p.src.url, Migration: migration})
		wantStatus(t, "redirect no machine", err, http.StatusNotFound)
	}},
	{"pause holds a rack, unpause lets it go", func(t *testing.T, p pair) {
		p.src.putRack(t, rackA())
		for range 2 {
			if r := must[api.Rack](t, "pause")(p.src.rack.PauseRack(ctx, rackUUID, api.RackHold{})); r.Status != api.RackPaused {
				t.Errorf("paused rack: %+v", r)
			}
		}
		for range 2 {
			if r := must[api.Rack](t, "unpause")(p.src.rack.UnpauseRack(ctx, rackUUID)); r.Status == api.RackPaused {
				t.Errorf("unpaused rack: %+v", r)
			}
		}
		_, err := p.src.rack.PauseRack(ctx, unknownUUID, api.RackHold{})
		wantStatus(t, "pause no rack", err, http.StatusNotFound)
		_, err = p.src.rack.GetRack(ctx, unknownUUID)
		wantStatus(t, "get no rack", err, http.StatusNotFound)
	}},
	{"a transfer run's hold refuses another run, and its recovery ends it once", func(t *testing.T, p pair) {
		p.src.putRack(t, rackA())
		first := api.RackHold{Transfer: "transfer-rack/" + rackUUID, Run: "run-1", From: "a", To: "b"}
		second := first
		second.Run = "run-2"
		r := must[api.Rack](t, "pause")(p.src.rack.PauseRack(ctx, rackUUID, first))
		if got := api.RackHoldOf(r); got.Run != "run-1" || got.Role != api.TransferSource {
			t.Errorf("hold of the paused rack: %+v", got)
		}
		_, err := p.src.rack.PauseRack(ctx, rackUUID, second)
		wantStatus(t, "pause for another run", err, http.StatusConflict)
		_, err = p.src.rack.RecoverRackTransfer(ctx, rackUUID, api.RackRecovery{Hold: api.RackHoldOf(r), Action: "explode"})
		wantStatus(t, "unknown recovery action", err, http.StatusUnprocessableEntity)
		held := api.RackHoldOf(r)
		other := held
		other.Run = "run-2"
		_, err = p.src.rack.RecoverRackTransfer(ctx, rackUUID, api.RackRecovery{Hold: other, Action: api.RecoverUnpause})
		wantStatus(t, "recover another run's hold", err, http.StatusConflict)
		for i, want := range []bool{true, false} {
			got := must[api.RackRecovered](t, "recover")(p.src.rack.RecoverRackTransfer(ctx, rackUUID, api.RackRecovery{Hold: held, Action: api.RecoverUnpause}))
			if got.Done != want {
				t.Errorf("recovery %d: Done %v, want %v", i+1, got.Done, want)
			}
		}
		if r := must[api.Rack](t, "get")(p.src.rack.GetRack(ctx, rackUUID)); r.Status == api.RackPaused || !api.RackHoldOf(r).IsZero() {
			t.Errorf("recovered rack: %+v", r)
		}
	}},
	{"a rack exports with the machines behind it", func(t *testing.T, p pair) {
		p.src.putRack(t, rackA())
		p.src.putMachine(t, api.Machine{Uuid: machineUUID, Name: "robin", Rack: rackUUID, HardwareAddrs: []string{"52:54:00:aa:bb:01"}})
		p.src.putMachine(t, api.Machine{Uuid: unknownUUID, Name: "wren"})
		b := must[api.RackBundle](t, "export")(p.src.rack.ExportRack(ctx, rackUUID))
		if b.Rack.Uuid != rackUUID || len(b.Machines) != 1 || b.Machines[0].Name != "robin" || len(b.Machines[0].HardwareAddrs) != 1 {
			t.Errorf("bundle: rack %+v, machines %+v", b.Rack, b.Machines)
		}
		_, err := p.src.rack.ExportRack(ctx, unknownUUID)
		wantStatus(t, "export no rack", err, http.StatusNotFound)
	}},
	{"a rack imports paused, once, refusing what clashes, and its import can be undone", func(t *testing.T, p pair) {
		p.src.putRack(t, rackA())
		p.src.putMachine(t, api.Machine{Uuid: machineUUID, Name: "robin", Rack: rackUUID, HardwareAddrs: []string{"52:54:00:aa:bb:01"}, Address: "10.0.0.5"})
		b := must[api.RackBundle](t, "export")(p.src.rack.ExportRack(ctx, rackUUID))
		p.dst.putRack(t, api.Rack{Uuid: otherRackUUID, Name: "rack-a"})
		p.dst.putMachine(t, api.Machine{Uuid: unknownUUID, Name: "robin", Address: "10.0.0.5"})
		check := must[api.TransferCheck](t, "check")(p.dst.rack.CheckRackImport(ctx, b))
		if len(check.Conflicts) != 3 || !slices.ContainsFunc(check.Conflicts, func(c string) bool { return strings.HasPrefix(c, "Address 10.0.0.5 is used by machine robin") }) {
			t.Errorf("conflicts %q, want the rack name, the machine name and its address", check.Conflicts)
		}
		_, err := p.dst.rack.ImportRack(ctx, b)
		wantStatus(t, "import over conflicts", err, http.StatusConflict)
		b.Rack.Name = "rack-a2"
		b.Machines[0].Name = "robin2"
		b.Machines[0].Address = "10.0.0.6"
		if check := must[api.TransferCheck](t, "check")(p.dst.rack.CheckRackImport(ctx, b)); len(check.Conflicts) != 0 {
			t.Errorf("conflicts %q, want none", check.Conflicts)
		}
		if res := must[api.RackImport](t, "import")(p.dst.rack.ImportRack(ctx, b)); res.Created == 0 {
			t.Errorf("first import created nothing: %+v", res)
		}
		if res := must[api.RackImport](t, "import again")(p.dst.rack.ImportRack(ctx, b)); res.Created != 0 {
			t.Errorf("retried import created %d", res.Created)
		}
		if r := must[api.Rack](t, "get")(p.dst.rack.GetRack(ctx, rackUUID)); r.Status != api.RackPaused || len(r.RegionEndpoints) != 0 {
			t.Errorf("imported rack: %+v", r)
		}
		for range 2 {
			wantStatus(t, "undo the import", p.dst.rack.UndoRackImport(ctx, rackUUID), 0)
		}
		_, err = p.dst.rack.GetRack(ctx, rackUUID)
		wantStatus(t, "get the undone rack", err, http.StatusNotFound)
		if _, err := p.dst.rack.GetRack(ctx, otherRackUUID); err != nil {
			t.Errorf("the undo removed a rack it did not import: %v", err)
		}
	}},
	{"only a paused rack is handed over", func(t *testing.T, p pair) {
		p.src.putRack(t, rackA())
		wantStatus(t, "hand over a rack not paused", p.src.rack.HandOverRack(ctx, rackUUID), http.StatusConflict)
		must[api.Rack](t, "pause")(p.src.rack.PauseRack(ctx, rackUUID, api.RackHold{}))
		wantStatus(t, "hand over", p.src.rack.HandOverRack(ctx, rackUUID), 0)
		_, err := p.src.rack.GetRack(ctx, rackUUID)
		wantStatus(t, "get the handed-over rack", err, http.StatusNotFound)
		wantStatus(t, "hand over no rack", p.src.rack.HandOverRack(ctx, rackUUID), http.StatusNotFound)
	}},
	{"a paused rack's operations are released once, with those handed over", func(t *testing.T, p pair) {
		p.src.putRack(t, rackA())
		p.src.putMachine(t, api.Machine{Uuid: machineUUID, Name: "robin", Rack: rackUUID})
		must[api.Rack](t, "pause")(p.src.rack.PauseRack(ctx, rackUUID, api.RackHold{}))
		p.src.queueOp(t, rackUUID, api.PendingOperation{Target: machineUUID, Kind: "power", Payload: map[string]any{"Action": "on"}})
		if ops := must[[]api.PendingOperation](t, "list")(p.src.rack.RackOperations(ctx, rackUUID)); len(ops) != 1 || ops[0].Target != machineUUID {
			t.Errorf("queued: %+v", ops)
		}
		rel := api.OperationsRelease{Origin: "region-x", Operations: []api.PendingOperation{{ID: 7, Target: rackUUID, Kind: "reboot", QueuedBy: "alice", QueuedRole: api.RoleOperator}}}
		released := must[[]api.PendingOperation](t, "release")(p.src.rack.ReleaseRackOperations(ctx, rackUUID, rel))
		if len(released) != 2 || !released[0].Released || released[0].Kind != "power" || released[1].Kind != "reboot" ||
			released[1].QueuedBy != "alice" || released[1].QueuedRole != api.RoleOperator {
			t.Errorf("released: %+v, want the handed-over operation with the caller its origin recorded", released)
		}
		if again := must[[]api.PendingOperation](t, "release again")(p.src.rack.ReleaseRackOperations(ctx, rackUUID, rel)); len(again) != 0 {
			t.Errorf("a retried release released %+v", again)
		}
		if ops := must[[]api.PendingOperation](t, "list")(p.src.rack.RackOperations(ctx, rackUUID)); len(ops) != 0 {
			t.Errorf("left after the release: %+v", ops)
		}
		_, err := p.src.rack.ReleaseRackOperations(ctx, rackUUID, api.OperationsRelease{Operations: rel.Operations})
		wantStatus(t, "handed-over operations without their origin", err, http.StatusUnprocessableEntity)
		tooMany := api.OperationsRelease{Origin: "region-x", Operations: make([]api.PendingOperation, api.MaxQueuedOperations+1)}
		for i := range tooMany.Operations {
			tooMany.Operations[i] = api.PendingOperation{ID: int64(100 + i), Target: rackUUID, Kind: "reboot"}
		}
		_, err = p.src.rack.ReleaseRackOperations(ctx, rackUUID, tooMany)
		wantStatus(t, "a hand-over of more than one rack's queue", err, http.StatusRequestEntityTooLarge)
	}},
	{"a stale attempt's steps are refused once a newer attempt acted, and change nothing", func(t *testing.T, p pair) {
		first, second := attemptCtx(1, 0), attemptCtx(2, time.Minute)
		seed(t, p.src)
		must[api.Machine](t, "quiesce by the first attempt")(p.src.Quiesce(first, machineUUID, api.QuiesceRequest{Migration: migration}))
		must[api.Machine](t, "quiesce again by the second")(p.src.Quiesce(second, machineUUID, api.QuiesceRequest{Migration: migration}))
		must[api.Machine](t, "the same attempt again")(p.src.Quiesce(second, machineUUID, api.QuiesceRequest{Migration: migration}))
		_, err := p.src.Quiesce(first, machineUUID, api.QuiesceRequest{Migration: migration})
		wantStale(t, "quiesce by the first attempt", err)
		_, err = p.src.UnquiesceFor(first, machineUUID, migration)
		wantStale(t, "unquiesce by the first attempt", err)
		if m := getMachine(t, p.src); m.Runnable || m.Meta[api.MetaMigrating] != migration {
			t.Errorf("source after the stale unquiesce: Runnable %v, migrating %q; want it still quiesced", m.Runnable, m.Meta[api.MetaMigrating])
		}
		ticket := must[api.Ticket](t, "mint")(p.dst.MintTicket(ctx, api.TicketRequest{}))
		b := must[api.Bundle](t, "export")(p.src.Export(second, machineUUID))
		imp := api.ImportRequest{Ticket: ticket.Token, Bundle: b, Migration: migration}
		must[api.Machine](t, "import by the second attempt")(p.dst.Import(second, imp))
		_, err = p.dst.Import(first, imp)
		wantStale(t, "import by the first attempt", err)
		must[api.Machine](t, "import again by the second")(p.dst.Import(second, imp))
		_, err = p.src.FinalizeMigrationFor(first, machineUUID, migration, api.FinalizeRequest{RedirectEndpoint: p.dst.url})
		wantStale(t, "finalize by the first attempt", err)
		if m := getMachine(t, p.src); m.Meta[api.MetaRedirectEndpoint] != "" {
			t.Errorf("the stale finalize made a stub: %+v", m)
		}
		for range 2 {
			must[api.Machine](t, "finalize by the second attempt")(p.src.FinalizeMigrationFor(second, machineUUID, migration, api.FinalizeRequest{RedirectEndpoint: p.dst.url}))
		}
		_, err = p.src.RestoreMigrationFor(first, machineUUID, migration)
		wantStale(t, "restore by the first attempt", err)
		_, err = p.dst.ActivateFor(first, machineUUID, migration)
		wantStale(t, "activate by the first attempt", err)
		_, err = p.dst.RedirectCopy(first, machineUUID, api.RedirectCopyRequest{RedirectEndpoint: p.src.url, Migration: migration})
		wantStale(t, "redirect the copy by the first attempt", err)
		wantStale(t, "delete the copy by the first attempt", p.dst.DeleteMachine(first, machineUUID, migration))
		if m := getMachine(t, p.src); m.Meta[api.MetaRedirectEndpoint] != p.dst.url {
			t.Errorf("source after the stale steps: %+v, want the stub redirecting to the target", m)
		}
		if m := getMachine(t, p.dst); m.Runnable || m.Meta[api.MetaRedirectEndpoint] != "" {
			t.Errorf("target after the stale steps: %+v, want the inactive copy", m)
		}
		must[api.Machine](t, "activate by the second attempt")(p.dst.ActivateFor(second, machineUUID, migration))
		// The copy is no longer held, and its fence still refuses the older attempt: its
		// undo must not delete the live machine.
		wantStale(t, "delete the live machine by the first attempt", p.dst.DeleteMachine(first, machineUUID, migration))
		// A settling batch is a new activity: its first attempt started after the second.
		must[api.Machine](t, "activate by a later activity's first attempt")(p.dst.ActivateFor(attemptCtx(1, 2*time.Minute), machineUUID, migration))
		// Steps naming no attempt (the per-machine path, older workers) are not fenced.
		must[api.Machine](t, "activate naming no attempt")(p.dst.ActivateFor(ctx, machineUUID, migration))
		if m := getMachine(t, p.dst); !m.Runnable {
			t.Errorf("target after the stale delete: %+v, want the live machine", m)
		}
	}},
	{"a stale quiesce after a newer attempt's undo holds nothing", func(t *testing.T, p pair) {
		seed(t, p.src)
		must[api.Machine](t, "quiesce by the first attempt")(p.src.Quiesce(attemptCtx(1, 0), machineUUID, api.QuiesceRequest{Migration: migration}))
		must[api.Machine](t, "unquiesce by a settling batch")(p.src.UnquiesceFor(attemptCtx(1, time.Minute), machineUUID, migration))
		_, err := p.src.Quiesce(attemptCtx(1, 0), machineUUID, api.QuiesceRequest{Migration: migration})
		wantStale(t, "the first attempt's quiesce landing late", err)
		if m := getMachine(t, p.src); !m.Runnable || m.Meta[api.MetaMigrating] != "" {
			t.Errorf("source after the stale quiesce: Runnable %v, migrating %q; want it live", m.Runnable, m.Meta[api.MetaMigrating])
		}
		// Another migration's batch replaces the fence.
		must[api.Machine](t, "quiesce by another migration's first attempt")(p.src.Quiesce(attemptCtx(1, 0), machineUUID, api.QuiesceRequest{Migration: other}))
	}},
	{"every primitive answers 404 for no machine", func(t *testing.T, p pair) {
		calls := map[string]func() error{
			"GetMachine": func() error { _, err := p.src.GetMachine(ctx, unknownUUID); return err },
			"GetJob":     func() error { _, err := p.src.GetJob(ctx, unknownUUID); return err },
			"Unquiesce":  func() error { _, err := p.src.UnquiesceFor(ctx, unknownUUID, migration); return err },
			"Finalize": func() error {
				_, err := p.src.FinalizeMigrationFor(ctx, unknownUUID, migration, api.FinalizeRequest{RedirectEndpoint: p.dst.url})
				return err
			},
			"Restore": func() error { _, err := p.src.RestoreMigrationFor(ctx, unknownUUID, migration); return err },
			"Delete":  func() error { return p.src.DeleteMachine(ctx, unknownUUID, migration) },
		}
		for name, call := range calls {
			wantStatus(t, name, call(), http.StatusNotFound)
		}
	}},
}
