package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"

	"github.com/ironflow/ironflow/dev/temporalserver"
	"github.com/ironflow/ironflow/region/tickets"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// forward is what the fake worker runs for a migration with a ticket, stub kept.
var forward = []string{"ValidateMigration", "Quiesce", "ExportImport", "FinalizeMigration", "Activate"}

func TestTicketFlowPrintsTheSeedLine(t *testing.T) {
	s := newMigrationSetup(t)
	code, ticket, stderr := ironflow(t, s.target.url, "machines", "migrateTicket", "--ttl", "30m")
	if code != 0 {
		t.Fatalf("migrateTicket: exit %d: %s", code, stderr)
	}
	claims, err := tickets.Parse(strings.TrimSuffix(ticket, "\n"))
	if err != nil || strings.Count(ticket, "\n") != 1 {
		t.Fatalf("migrateTicket printed %q, not one ticket line: %v", ticket, err)
	}
	if claims.Region != "region-b" {
		t.Errorf("ticket is for %q", claims.Region)
	}

	// As in the seed: migrate Name:birdy to "$(... machines migrateTicket)".
	code, out, stderr := ironflow(t, s.source.url, "machines", "migrate", "Name:birdy", "to", strings.TrimSpace(ticket))
	if code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, stderr)
	}
	if want := "Machine Name:birdy migrated to https://region-b.example:5240\n"; out != want {
		t.Errorf("migrate printed %q, want %q", out, want)
	}
	if got := s.fake.called(s.workflowID); !slices.Equal(got, forward) {
		t.Errorf("activities %v, want %v (the user's ticket, no MintTicket)", got, forward)
	}
	if got := s.fake.ticketUsed(s.workflowID); got != claims.ID {
		t.Errorf("import used ticket %q, want the printed one %q", got, claims.ID)
	}
	if got, want := s.source.seen(), []string{"GET /api/v1/info", "GET /api/v1/machines/Name:birdy", "POST /api/v1/migrate-grants"}; !slices.Equal(got, want) {
		t.Errorf("source region saw %v, want %v", got, want)
	}
}

func TestMigrateWaitPrintsPhasesThenTheResult(t *testing.T) {
	s := newMigrationSetup(t)
	release := s.fake.hold(t, s.workflowID)
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- ironflowTo(context.Background(), &out, &errOut, s.source.url, "machines", "migrate", "Name:birdy", "--to", "region-b", "--wait")
	}()
	eventually(t, func() string {
		if !strings.Contains(errOut.String(), workflows.PhaseCopying+"\n") {
			return "no copying phase shown yet: " + errOut.String()
		}
		return ""
	})
	release()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	phases := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	order := []string{workflows.PhaseValidating, workflows.PhaseQuiescing, workflows.PhaseCopying,
		workflows.PhaseFinalizing, workflows.PhaseActivating, workflows.PhaseCompleted}
	last := -1
	for _, p := range phases {
		i := slices.Index(order, p)
		if i <= last {
			t.Fatalf("phases %q are not distinct phases in workflow order %v", phases, order)
		}
		last = i
	}
	if phases[len(phases)-1] != workflows.PhaseCompleted {
		t.Errorf("last phase %q, want %q", phases[len(phases)-1], workflows.PhaseCompleted)
	}
	res := decode[workflows.MigrateMachineResult](t, out.String())
	if res.MachineUuid != s.machine || res.MachineName != "birdy" || res.TargetEndpoint != "https://region-b.example:5240" || res.Jobs != 2 {
		t.Errorf("result %+v", res)
	}
	want := []string{"ValidateMigration", "Quiesce", "ExportImport", "FinalizeMigration", "Activate"}
	if got := s.fake.called(s.workflowID); !slices.Equal(got, want) {
		t.Errorf("activities %v, want %v", got, want)
	}

	code, shown, stderr := ironflow(t, "", "migrations", "show", s.machine)
	if code != 0 {
		t.Fatalf("show: exit %d: %s", code, stderr)
	}
	d := decode[migrationDetail](t, shown)
	if d.Status != "completed" || d.Result == nil || *d.Result != res || d.MigrationPhase != workflows.PhaseCompleted || d.Failure != "" {
		t.Errorf("show of a completed migration: %+v", d)
	}
}

// TestMigrationLifecycle starts a migration without waiting, is refused a second one, lists
// and shows it running, then cancels it and sees the compensations run.
func TestMigrationLifecycle(t *testing.T) {
	s := newMigrationSetup(t)
	s.fake.hold(t, s.workflowID)
	code, out, stderr := ironflow(t, s.source.url, "machines", "migrate", "Name:birdy", "--to", "region-b", "--delete-stub")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	started := decode[startedMigration](t, out)
	if started.WorkflowID != s.workflowID || started.RunID == "" {
		t.Errorf("started %+v, want workflow %s", started, s.workflowID)
	}
	if !strings.Contains(stderr, "ironflow migrations show "+s.workflowID) {
		t.Errorf("no hint how to follow it: %q", stderr)
	}

	code, _, stderr = ironflow(t, s.source.url, "machines", "migrate", "Name:birdy", "--to", "region-b")
	want := "machine Name:birdy is already being migrated by " + s.workflowID + " (run " + started.RunID + ")"
	if code == 0 || !strings.Contains(stderr, want) {
		t.Errorf("second start: exit %d, stderr %q; want %q", code, stderr, want)
	}

	var d migrationDetail
	eventually(t, func() string {
		code, out, stderr := ironflow(t, "", "migrations", "show", s.workflowID)
		if code != 0 {
			return "show: " + stderr
		}
		d = decode[migrationDetail](t, out)
		if d.Progress == nil || d.Progress.Phase != workflows.PhaseCopying {
			return "not copying yet: " + out
		}
		return ""
	})
	wantInput := workflows.MigrateMachineInput{SourceRegion: "region-a", TargetRegion: "region-b", Machine: s.machine, WaitForRunningJob: 10 * time.Minute}
	if d.Status != "running" || d.RunID != started.RunID || d.Input == nil || d.Input.SkipMachineDestroy == nil || *d.Input.SkipMachineDestroy {
		t.Fatalf("show of a running migration: %+v", d)
	}
	d.Input.SkipMachineDestroy = nil
	if !strings.HasPrefix(d.Input.Grant, workflows.RedactedTicket+" grant ") {
		t.Errorf("show prints the migration's grant %q, want it %s with its ID, user and expiry (it authorises the move until it expires)", d.Input.Grant, workflows.RedactedTicket)
	}
	d.Input.Grant = ""
	if *d.Input != wantInput {
		t.Errorf("input %+v, want %+v", *d.Input, wantInput)
	}
	if d.MachineUuid != s.machine || d.MachineName != "birdy" || d.SourceRegion != "region-a" || d.TargetRegion != "region-b" {
		t.Errorf("search attributes %+v", d.Run)
	}

	eventually(t, func() string {
		return listed(t, []string{"--machine", s.machine, "--status", "running"}, s.workflowID, "running", workflows.PhaseCopying)
	})
	if code, out, stderr := ironflow(t, "", "migrations", "list", "--machine", s.machine, "--status", "completed"); code != 0 || out != "[]\n" {
		t.Errorf("list of completed migrations: exit %d, %q %s", code, out, stderr)
	}

	// The phase is set when the copy is scheduled; cancel once the copy runs (held), so the
	// undo has a step to undo. (A cancel before a worker starts the copy cancels it unstarted,
	// and the workflow undoes it all the same, which finds nothing.)
	eventually(t, func() string {
		if got := s.fake.called(s.workflowID); !slices.Contains(got, "ExportImport") {
			return "the copy has not started: " + strings.Join(got, " ")
		}
		return ""
	})
	code, out, stderr = ironflow(t, "", "migrations", "cancel", s.workflowID)
	if code != 0 || !strings.Contains(out, "Cancel requested for migration "+s.workflowID) {
		t.Fatalf("cancel: exit %d: %q %s", code, out, stderr)
	}
	eventually(t, func() string {
		return listed(t, []string{"--machine", s.machine}, s.workflowID, "canceled", workflows.PhaseCanceled)
	})
	wantCalls := []string{"ValidateMigration", "Quiesce", "ExportImport", "UndoCopy", "Unquiesce"}
	if got := s.fake.called(s.workflowID); !slices.Equal(got, wantCalls) {
		t.Errorf("activities %v, want the compensations in reverse: %v", got, wantCalls)
	}
	code, out, _ = ironflow(t, "", "migrations", "show", s.workflowID)
	if d := decode[migrationDetail](t, out); code != 0 || d.Status != "canceled" || d.Failure != "canceled" || d.Result != nil {
		t.Errorf("show of a canceled migration: %+v", d)
	}
}

// listed checks that `migrations list FLAGS` shows exactly the migration id in status and phase.
func listed(t *testing.T, flags []string, id, status, phase string) string {
	code, out, stderr := ironflow(t, "", append([]string{"migrations", "list"}, flags...)...)
	if code != 0 {
		return "list: " + stderr
	}
	list := decode[[]moves.Run](t, out)
	if len(list) != 1 || list[0].WorkflowID != id || list[0].Status != status || list[0].MigrationPhase != phase {
		return "list " + strings.Join(flags, " ") + " shows " + out + ", want " + id + " " + status + " " + phase
	}
	return ""
}

func TestBadMigrateInputStartsNothing(t *testing.T) {
	s := newMigrationSetup(t)
	ticket, err := signers["region-b"].Mint(time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := signers["region-b"].Mint(time.Now().Add(-2*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		endpoint string
		args     []string
		want     string
	}{
		{"no machine", s.source.url, []string{"machines", "migrate"}, "missing the machine"},
		{"no destination", s.source.url, []string{"machines", "migrate", "Name:birdy"}, "missing the destination of Name:birdy"},
		{"missing to", s.source.url, []string{"machines", "migrate", "Name:birdy", ticket.Token}, "unexpected"},
		{"to without ticket", s.source.url, []string{"machines", "migrate", "Name:birdy", "to"}, "missing the ticket after `to`"},
		{"empty ticket", s.source.url, []string{"machines", "migrate", "Name:birdy", "to", ""}, "missing the ticket after `to`"},
		{"no ticket claims", s.source.url, []string{"machines", "migrate", "Name:birdy", "to", "bm90IGpzb24.c2ln"}, "ticket: malformed ticket"},
		{"ticket without region", s.source.url, []string{"machines", "migrate", "Name:birdy", "to", base64.RawURLEncoding.EncodeToString([]byte(`{"jti":"x"}`)) + ".c2ln"}, "missing id, region or endpoint"},
		{"expired ticket", s.source.url, []string{"machines", "migrate", "Name:birdy", "to", expired.Token}, "ticket: ticket expired at"},
		{"not a ticket", s.source.url, []string{"machines", "migrate", "Name:birdy", "to", "https://region-b:5240"}, "ticket: malformed ticket"},
		{"ticket and --to", s.source.url, []string{"machines", "migrate", "Name:birdy", "to", ticket.Token, "--to", "region-b"}, "not both"},
		{"unknown machine", s.source.url, []string{"machines", "migrate", "Name:nobody", "--to", "region-b"}, "machine Name:nobody on region region-a: machines Name:nobody not found"},
		{"same region", s.source.url, []string{"machines", "migrate", "Name:birdy", "--to", "region-a"}, "already on region region-a"},
		{"-E is not --from", s.source.url, []string{"machines", "migrate", "Name:birdy", "--to", "region-b", "--from", "region-c"}, "-E is region region-a, not --from region-c"},
		{"negative job wait", s.source.url, []string{"machines", "migrate", "Name:birdy", "--to", "region-b", "--wait-for-running-job", "-1s"}, "negative"},
		{"ticket TTL", s.target.url, []string{"machines", "migrateTicket", "--ttl", "48h"}, "--ttl 48h0m0s is outside"},
		{"list status", "", []string{"migrations", "list", "--status", "bogus"}, `--status "bogus" is not a workflow status`},
		{"list machine", "", []string{"migrations", "list", "--machine", "' OR '1'='1"}, "is not a machine UUID"},
		{"show unknown", "", []string{"migrations", "show", uuid.NewString()}, "no migration migrate-machine/"},
		{"cancel unknown", "", []string{"migrations", "cancel", "migrate-machine/none"}, "no migration migrate-machine/none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := ironflow(t, tt.endpoint, tt.args...)
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want an error with %q", code, out, stderr, tt.want)
			}
		})
	}
	_, err = s.tc.DescribeWorkflowExecution(context.Background(), s.workflowID, "")
	var notFound *serviceerror.NotFound
	if !errors.As(err, &notFound) {
		t.Errorf("bad input started %s: %v", s.workflowID, err)
	}
	if got := s.target.seen(); len(got) != 0 {
		t.Errorf("bad input reached the target region: %v", got)
	}
}

// TestHelpShowsTheTemporalCLIEquivalent runs the command the help prints with the official
// Temporal CLI, and checks that the workflow it starts is the one machines migrate starts.
func TestHelpShowsTheTemporalCLIEquivalent(t *testing.T) {
	s := newMigrationSetup(t)
	code, help, _ := ironflow(t, "", "machines", "migrate", "--help")
	const example = `temporal workflow start --task-queue ironflow --type MigrateMachine --workflow-id migrate-machine/<uuid> --id-conflict-policy Fail --input '{"SourceRegion":"region-a","TargetRegion":"region-b","Machine":"Name:birdy","Grant":"'"$(ironflow -E https://region-a:5240 machines migrateGrant Name:birdy --to region-b)"'"}'`
	if code != 0 || !strings.Contains(help, example) {
		t.Fatalf("help (exit %d) lacks %s:\n%s", code, example, help)
	}
	code, grant, stderr := ironflow(t, s.source.url, "machines", "migrateGrant", s.machine, "--to", "region-b")
	if code != 0 || strings.Count(grant, "\n") != 1 {
		t.Fatalf("migrateGrant: exit %d, %q, %s", code, grant, stderr)
	}
	input := `{"SourceRegion":"region-a","TargetRegion":"region-b","Machine":"` + s.machine + `","Grant":"` + strings.TrimSpace(grant) + `"}`
	dec := json.NewDecoder(strings.NewReader(input))
	dec.DisallowUnknownFields()
	var in workflows.MigrateMachineInput
	if err := dec.Decode(&in); err != nil {
		t.Fatalf("the example's input does not fit MigrateMachineInput: %v", err)
	}

	bin, err := temporalserver.FindCLI()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "workflow", "start", "--address", shared.server.Address,
		"--task-queue", workflows.TaskQueue, "--type", "MigrateMachine", "--workflow-id", s.workflowID,
		"--id-conflict-policy", "Fail", "--input", input)
	var cliErr bytes.Buffer
	cmd.Stderr = &cliErr
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("temporal workflow start: %v\n%s%s", err, out, cliErr.String())
	}
	eventually(t, func() string {
		return listed(t, []string{"--machine", s.machine}, s.workflowID, "completed", workflows.PhaseCompleted)
	})
	want := []string{"ValidateMigration", "Quiesce", "ExportImport", "FinalizeMigration", "Activate"}
	if got := s.fake.called(s.workflowID); !slices.Equal(got, want) {
		t.Errorf("activities %v, want %v", got, want)
	}
}

// TestMigrateByUUIDAsksOnlyForAGrant: with a machine UUID and --from, the -E region (the
// source) is only asked to authorise the move.
func TestMigrateByUUIDAsksOnlyForAGrant(t *testing.T) {
	s := newMigrationSetup(t)
	code, out, stderr := ironflow(t, s.source.url, "machines", "migrate", s.machine, "--from", "region-a", "--to", "region-b", "--wait", "-o", "table")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := s.source.seen(); !slices.Equal(got, []string{"POST /api/v1/migrate-grants"}) {
		t.Errorf("requests to the source: %v", got)
	}
	if !strings.Contains(out, "birdy") || !strings.Contains(out, "https://region-b.example:5240") || !strings.HasPrefix(out, "MACHINE") {
		t.Errorf("result table:\n%s", out)
	}
	if got := s.fake.called(s.workflowID); len(got) == 0 || got[len(got)-1] != "Activate" {
		t.Errorf("activities %v", got)
	}
}

func TestWaitReportsACanceledMigration(t *testing.T) {
	s := newMigrationSetup(t)
	s.fake.hold(t, s.workflowID)
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- ironflowTo(context.Background(), &out, &errOut, s.source.url, "machines", "migrate", "Name:birdy", "--to", "region-b", "--wait")
	}()
	eventually(t, func() string {
		if !strings.Contains(errOut.String(), workflows.PhaseCopying+"\n") {
			return "no copying phase shown yet: " + errOut.String()
		}
		return ""
	})
	if code, _, stderr := ironflow(t, "", "migrations", "cancel", s.machine); code != 0 {
		t.Fatalf("cancel: exit %d: %s", code, stderr)
	}
	if code := <-done; code == 0 {
		t.Fatalf("a canceled migration exited 0: %s", errOut.String())
	}
	stderr := errOut.String()
	for _, want := range []string{
		"\n" + workflows.PhaseCanceled + "\n",
		"error: copying: canceled\n",
		"Error: migration " + s.workflowID + " was canceled; the steps it had done were undone\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if out.String() != "" {
		t.Errorf("stdout %q", out.String())
	}
}
