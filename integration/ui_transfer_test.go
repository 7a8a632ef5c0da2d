package integration

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/server"
	"github.com/ironflow/ironflow/region/ui/uitemporal"
	"github.com/ironflow/ironflow/region/ui/uitest"
	"github.com/ironflow/ironflow/workflows"
)

// TestUITransfersARack starts the transfer of the seed's rack-a from region-a's web UI in
// chromium, pauses it from there while a job running behind the rack holds it in its drain
// step, sees it stay paused with nothing moved once the job ended, resumes it, and watches
// its progress, polled by the page, reach completed.
func TestUITransfersARack(t *testing.T) {
	chrome := uitest.Start(t)
	s := startStack(t, dev.StackOptions{Seed: true, RunWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	a := regionClient(s, "region-a")
	rack := s.Racks["rack-a"]
	if err := s.WaitRackOnline(ctx, rack.Name); err != nil {
		t.Fatal(err)
	}
	// region-a's UI with transfers: a second process of region-a on its database, as
	// `region serve --ui-transfers` runs it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ui := server.New(s.Regions["region-a"].Store, server.Config{Name: "region-a", PublicURL: s.Regions["region-a"].URL, Version: "test", UI: true,
		UITransfers: uitemporal.New(s.Client), Logger: abuseLogger(t)})
	serveCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ui.Serve(serveCtx, ln) }()
	t.Cleanup(func() { stop(); <-done })
	base := "http://" + ln.Addr().String()

	machines, _, finishJob := runningJobOnRack(ctx, t, a, s.Regions["region-a"].URL, rack.Uuid, "ui-transfer-agent-secret")
	if _, err := a.Users().Create(ctx, api.User{Name: "ui-operator", Role: api.RoleOperator}); err != nil {
		t.Fatal(err)
	}
	tok, err := a.MintToken(ctx, "ui-operator", api.TokenRequest{})
	if err != nil {
		t.Fatal(err)
	}

	tab := chrome.Tab()
	uitest.SignIn(t, tab, base, tok.Token)
	uitest.Do(t, tab, "open the rack", chromedp.Navigate(base+"/racks/"+rack.Uuid), chromedp.WaitVisible(chromedp.ID("target")))
	uitest.Do(t, tab, "start the transfer", chromedp.SendKeys(chromedp.ID("target"), "region-b"), chromedp.Submit(chromedp.ID("target")),
		chromedp.WaitVisible(chromedp.ID("pause")))
	uitest.Submit(t, tab, "pause it", "#pause")
	uitest.Do(t, tab, "see it paused", chromedp.WaitVisible(chromedp.ID("resume")), chromedp.WaitVisible(chromedp.ID("transfer-paused")))
	uitest.Screenshot(t, tab, "rack-transfer")

	// The job ends as a real one does, by its agent; the transfer then stays paused, moving nothing.
	finishJob()
	progress := func() workflows.TransferProgress {
		var p workflows.TransferProgress
		v, err := s.Client.QueryWorkflow(ctx, workflows.TransferRackID(rack.Uuid), "", workflows.ProgressQuery)
		if err == nil {
			err = v.Get(&p)
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	pollPhase(t, tab, workflows.PhaseMigratingMachines)
	if p := progress(); !p.Paused || p.MachinesDone != 0 || p.MachinesRunning != 0 {
		t.Fatalf("past its drain, the paused transfer: %+v, want paused with nothing moved", p)
	}
	uitest.Submit(t, tab, "resume it", "#resume")
	pollPhase(t, tab, workflows.PhaseCompleted)
	want := fmt.Sprintf("%d of %d machines moved", len(machines), len(machines))
	if counts := uitest.Text(t, tab, "#transfer-counts"); !strings.HasPrefix(counts, want) {
		t.Errorf("completed: the page says %q, want %q", counts, want)
	}
	for _, m := range machines {
		assertActiveOnExactlyOne(ctx, t, s, m.Uuid, "region-b")
	}
}

// pollPhase waits until the page, polling the transfer's progress itself, shows phase.
func pollPhase(t *testing.T, tab context.Context, phase string) {
	t.Helper()
	uitest.Do(t, tab, "wait for phase "+phase, chromedp.Poll[chromedp.Void](
		`(document.querySelector('#transfer-phase') || {}).textContent === '`+phase+`'`, chromedp.WithPollingTimeout(3*time.Minute)))
}
