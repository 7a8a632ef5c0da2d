package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/tickets"
	"github.com/ironflow/ironflow/workflows"
)

const transferRackUUID = "aaaaaaaa-0000-4000-8000-0000000000aa"

// rackRegion serves region-a's info and one rack, rack-a.
func rackRegion(t *testing.T) string {
	t.Helper()
	rack := api.Rack{Uuid: transferRackUUID, Name: "rack-a", Status: api.RackOnline}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/info", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, http.StatusOK, api.Info{Name: "region-a", Uuid: "uuid-region-a", URL: "https://region-a.example:5240"})
	})
	mux.HandleFunc("GET /api/v1/racks/{key}", func(w http.ResponseWriter, r *http.Request) {
		if key := r.PathValue("key"); key == rack.Uuid || key == "Name:"+rack.Name {
			answer(w, http.StatusOK, rack)
			return
		}
		answer(w, http.StatusNotFound, api.Error{Error: "rack " + r.PathValue("key") + " not found", Code: http.StatusNotFound})
	})
	grantRoutes(mux, "region-a")
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestRacksTransferRefusesBadInput(t *testing.T) {
	region := rackRegion(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no target", []string{"racks", "transfer", "rack-a"}, "missing the target region"},
		{"no rack", []string{"racks", "transfer", "--to", "region-b"}, "accepts 1 arg"},
		{"zero window", []string{"racks", "transfer", "rack-a", "--to", "region-b", "--window", "0"}, "--window 0"},
		{"window above the cap", []string{"racks", "transfer", "rack-a", "--to", "region-b", "--window", "51"}, "--window 51 is not between 1 and 50"},
		{"negative job wait", []string{"racks", "transfer", "rack-a", "--to", "region-b", "--wait-for-running-job", "-1s"}, "is negative"},
		{"same region", []string{"racks", "transfer", "rack-a", "--to", "region-a"}, "is on region region-a already"},
		{"unknown rack", []string{"racks", "transfer", "rack-z", "--to", "region-b"}, "rack rack-z on region region-a: rack Name:rack-z not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := ironflow(t, region, tt.args...)
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want an error with %q", code, out, stderr, tt.want)
			}
		})
	}
}

// racks transfer starts transfer-rack/<uuid> with the rack resolved by name on the -E region
// as the source, and refuses a second transfer of the rack while one runs.
func TestRacksTransferStartsTheWorkflow(t *testing.T) {
	tc, _ := temporalEnv(t)
	region := rackRegion(t)
	id := workflows.TransferRackID(transferRackUUID)
	code, out, stderr := ironflow(t, region, "racks", "transfer", "rack-a", "--to", "region-b", "--window", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	t.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), id, "", "test over") })
	started := decode[startedMigration](t, out)
	if started.WorkflowID != id || started.RunID == "" {
		t.Errorf("printed %+v, want workflow %s", started, id)
	}
	desc, err := tc.DescribeWorkflowExecution(context.Background(), id, started.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if typ := desc.GetWorkflowExecutionInfo().GetType().GetName(); typ != "TransferRack" {
		t.Errorf("workflow type %q", typ)
	}
	hist := tc.GetWorkflowHistory(context.Background(), id, started.RunID, false, 0)
	first, err := hist.Next()
	if err != nil {
		t.Fatal(err)
	}
	var in workflows.TransferRackInput
	payload := first.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
	if err := json.Unmarshal(payload.GetData(), &in); err != nil {
		t.Fatal(err)
	}
	want := workflows.TransferRackInput{SourceRegion: "region-a", TargetRegion: "region-b", Rack: transferRackUUID, Window: 3, WaitForRunningJob: 10 * time.Minute}
	if g, err := tickets.ParseGrant(in.Grant); err != nil || g.Kind != api.GrantRack || g.Subject != transferRackUUID {
		t.Errorf("the transfer carries grant %+v (%v), want the rack's", g, err)
	}
	in.Grant = ""
	if in != want {
		t.Errorf("input %+v, want %+v", in, want)
	}
	// show renders it as a transfer, with its input.
	code, out, stderr = ironflow(t, region, "migrations", "show", id)
	d := decode[transferDetail](t, out)
	if d.Input != nil {
		d.Input.Grant = ""
	}
	if code != 0 || d.WorkflowID != id || d.Input == nil || *d.Input != want {
		t.Errorf("show %s: exit %d, %+v, %s", id, code, d, stderr)
	}
	code, _, stderr = ironflow(t, region, "racks", "transfer", transferRackUUID, "--to", "region-b")
	if code == 0 || !strings.Contains(stderr, "rack rack-a is already being transferred by "+id) {
		t.Errorf("second transfer: exit %d, stderr %q", code, stderr)
	}
}

// TestWindowDefaultIsOneConstant: every command with --window states the same default, the
// workflows' DefaultBulkWindow (which is also the transfer's), and docs/moves.md states that one.
func TestWindowDefaultIsOneConstant(t *testing.T) {
	if workflows.DefaultTransferWindow != workflows.DefaultBulkWindow {
		t.Errorf("DefaultTransferWindow %d, DefaultBulkWindow %d: two defaults", workflows.DefaultTransferWindow, workflows.DefaultBulkWindow)
	}
	want := fmt.Sprintf("(default %d)", workflows.DefaultBulkWindow)
	for _, args := range [][]string{{"racks", "transfer"}, {"migrations", "bulk"}, {"migrations", "schedule", "create"}} {
		code, out, stderr := ironflow(t, "", append(args, "--help")...)
		line := regexp.MustCompile(`--window int .*`).FindString(out)
		if code != 0 || !strings.Contains(line, want) {
			t.Errorf("%s --help: exit %d, --window line %q, want %q in it (stderr %q)", strings.Join(args, " "), code, line, want, stderr)
		}
	}
	readme := readFile(t, "../../docs/moves.md")
	stated := regexp.MustCompile("`--window`(?:[^.0-9]*?defaults to|:) (\\d+)").FindAllStringSubmatch(readme, -1)
	if len(stated) == 0 {
		t.Fatal("docs/moves.md does not state the --window default")
	}
	for _, m := range stated {
		if m[1] != strconv.Itoa(workflows.DefaultBulkWindow) {
			t.Errorf("docs/moves.md says %q, the default is %d", m[0], workflows.DefaultBulkWindow)
		}
	}
}
