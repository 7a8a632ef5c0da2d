package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/workflows"
)

// Bad windows are refused before Temporal is contacted: the address points nowhere.
func TestMigrationsWindowRefusesBadWindows(t *testing.T) {
	t.Setenv("IRONFLOW_TEMPORAL_ADDRESS", "127.0.0.1:1")
	for arg, want := range map[string]string{"0": "window 0 is not between 1 and 50", "51": "window 51 is not between 1 and 50", "x": `window "x" is not a number`} {
		code, out, stderr := ironflow(t, "", "migrations", "window", "bulk-migrate/n", arg)
		if code == 0 || out != "" || !strings.Contains(stderr, want) || strings.Contains(stderr, "connect to Temporal") {
			t.Errorf("window %s: exit %d, stdout %q, stderr %q; want a refusal saying %q", arg, code, out, stderr, want)
		}
	}
}

// A running bulk migration (window 1, its first machine held) is paused, given a window,
// and resumed through the CLI: while paused, the held machine finishes and no other starts.
func TestMigrationsPauseWindowResume(t *testing.T) {
	s := newBulkSetup(t, 3, 0)
	name := "controls-" + uuid.NewString()
	id := workflows.BulkMigrateID(name)
	machines := slices.Sorted(slices.Values(s.known))
	release := s.fake.hold(t, workflows.MigrateMachineID(machines[0]))
	if code, _, stderr := ironflow(t, "", "migrations", "bulk", "--name", name, "--from", "region-a", "--to", "region-b", "--pool", s.pool, "--window", "1"); code != 0 {
		t.Fatalf("bulk: exit %d, %s", code, stderr)
	}
	testutil.Eventually(t, 30*time.Second, "the first machine's copy to start", func() bool {
		return slices.Contains(s.fake.called(workflows.MigrateMachineID(machines[0])), "ExportImport")
	})

	steps := []struct {
		args    []string
		wantOut string
		wantErr string
	}{
		{[]string{"pause", id}, id + ": paused, window 1\n", ""},
		{[]string{"pause", id}, "", "Error: migration " + id + " refused the request: the run is already paused\n"},
		{[]string{"resume", id}, id + ": running, window 1\n", ""},
		{[]string{"resume", id}, "", "Error: migration " + id + " refused the request: the run is not paused\n"},
		{[]string{"pause", id}, id + ": paused, window 1\n", ""},
		{[]string{"window", id, "3"}, id + ": paused, window 3\n", ""},
		{[]string{"window", id, "3"}, "", "Error: migration " + id + " refused the request: the run's window is already 3\n"},
		{[]string{"show", id, "-o", "table"}, "(paused, window 3)", ""},
	}
	for _, st := range steps {
		code, out, stderr := ironflow(t, "", append([]string{"migrations"}, st.args...)...)
		if st.wantErr != "" {
			if code == 0 || !strings.HasSuffix(stderr, st.wantErr) {
				t.Errorf("%v: exit %d, stderr %q, want %q", st.args, code, stderr, st.wantErr)
			}
			continue
		}
		if code != 0 || !strings.Contains(out, st.wantOut) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q, want %q", st.args, code, out, stderr, st.wantOut)
		}
	}

	release()
	testutil.Eventually(t, 30*time.Second, "the held machine to finish", func() bool {
		_, out, _ := ironflow(t, "", "migrations", "show", id, "-o", "table")
		return strings.Contains(out, "1/3 migrated, 0 failed, 0 skipped, 0 running (paused, window 3)")
	})
	for _, m := range machines[1:] {
		if calls := s.fake.called(workflows.MigrateMachineID(m)); len(calls) != 0 {
			t.Errorf("machine %s started while paused: %v", m, calls)
		}
	}
	if code, out, stderr := ironflow(t, "", "migrations", "resume", id); code != 0 || out != id+": running, window 3\n" {
		t.Fatalf("resume: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	var res workflows.BulkMigrateResult
	if err := s.tc.GetWorkflow(context.Background(), id, "").Get(context.Background(), &res); err != nil {
		t.Fatal(err)
	}
	if res.Migrated != 3 {
		t.Errorf("result %+v", res)
	}
	want := []string{"pause by op on region-a", "resume by op on region-a", "pause by op on region-a", "set-window 3 by op on region-a", "resume by op on region-a"}
	if got := s.fake.audited(); !slices.Equal(got, want) {
		t.Errorf("audited %q, want %q", got, want)
	}
	if code, _, stderr := ironflow(t, "", "migrations", "resume", id); code == 0 || !strings.Contains(stderr, "already finished") {
		t.Errorf("resume of a finished run: exit %d, stderr %q", code, stderr)
	}
}
