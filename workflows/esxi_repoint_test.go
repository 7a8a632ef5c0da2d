package workflows_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/esxi"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

const (
	prepare   = "ESXiPrepare"
	rewrite   = "ESXiRewriteAgentConfig"
	cleanup   = "ESXiCleanup"
	waitAgent = "WaitForAgentCheckIn"
	hostKey   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyOfTheEsxiHost"
)

// forward is what runs before the repoint step of a migration.
var forward = []string{"ValidateMigration", "Quiesce", "ExportImport", "FinalizeMigration"}

// undo is what compensates those steps, in order.
var undo = []string{"RestoreMigration", "UndoCopy", "Unquiesce"}

func seq(parts ...[]string) []string { return slices.Concat(parts...) }

// esxiHost makes birdy an ESXi host and mocks the three ESXi activities; fail names the
// activity that fails for good (once for ESXiCleanup, so its compensation can succeed).
type esxiHost struct {
	prepared          []activities.ESXiInput
	rewritten         []activities.ESXiRewriteInput
	cleaned           []activities.ESXiInput
	cleanupFailedOnce bool
}

func (f *fixture) withESXi(agent bool, fail string) *esxiHost {
	h := &esxiHost{}
	f.east.Update(u, func(m *api.Machine) { m.OS, m.Address = "ESXi-8.0U2", "10.0.0.5" })
	if agent {
		f.giveAgent()
	}
	boom := func(op string) error {
		return temporal.NewNonRetryableApplicationError(op+" failed on the host", "HostFailure", nil)
	}
	f.env.OnActivity(a.ESXiPrepare, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ESXiInput) (esxi.Prepared, error) {
		h.prepared = append(h.prepared, in)
		if fail == prepare {
			return esxi.Prepared{}, boom(prepare)
		}
		return esxi.Prepared{HostKey: hostKey, PublicKey: "ssh-ed25519 AAAA ironflow-migrate-" + u}, nil
	})
	f.env.OnActivity(a.ESXiRewriteAgentConfig, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ESXiRewriteInput) error {
		h.rewritten = append(h.rewritten, in)
		if fail == rewrite && in.Endpoint == "https://west.example:5240" { // the rewrite back works
			return boom(rewrite)
		}
		return nil
	})
	f.env.OnActivity(a.ESXiCleanup, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ESXiInput) error {
		h.cleaned = append(h.cleaned, in)
		if fail == cleanup && !h.cleanupFailedOnce {
			h.cleanupFailedOnce = true
			return boom(cleanup)
		}
		return nil
	})
	return h
}

// forget undoes withESXi's changes to birdy, for the assertions on the regions.
func (f *fixture) forgetESXi() {
	for _, r := range []string{"east", "west"} {
		if _, ok := f.region(r).Machine(u); ok {
			f.region(r).Update(u, func(m *api.Machine) {
				m.OS, m.Address = "", ""
				delete(m.Meta, api.MetaAgentLastSeen)
			})
		}
	}
}

func TestMigrateMachineESXiRepoint(t *testing.T) {
	tests := []struct {
		name     string
		agent    bool
		wantActs []string
	}{
		{"operator key, no agent", false, seq(forward, []string{prepare, rewrite, cleanup, "Activate"})},
		{"agent runs the host-side steps", true, seq(forward, []string{prepare, rewrite, waitAgent, cleanup, "Activate"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			h := f.withESXi(tt.agent, "")
			if tt.agent {
				f.env.OnActivity(a.WaitForAgentCheckIn, mock.Anything, mock.Anything).Return(nil)
			}
			res, err := f.run(input())
			if err != nil {
				t.Fatal(err)
			}
			equal(t, "activities", f.activities, tt.wantActs)
			if !res.AgentRepointed {
				t.Error("result does not report the repointed agent")
			}
			first := activities.ESXiInput{MachineRef: activities.MachineRef{Region: "west", Machine: u, Migration: workflows.MigrateMachineID(u)}, UseAgent: tt.agent}
			pinned := first
			pinned.HostKey = hostKey
			equal(t, "Prepare inputs", h.prepared, []activities.ESXiInput{first})
			equal(t, "Rewrite inputs", h.rewritten, []activities.ESXiRewriteInput{{ESXiInput: pinned, Endpoint: "https://west.example:5240"}})
			equal(t, "Cleanup inputs", h.cleaned, []activities.ESXiInput{pinned})
			f.forgetESXi()
			f.assertMigrated(false)
			equal(t, "phases", f.phases, []string{"validating", "quiescing", "copying", "finalizing", "repointing-agent", "activating", "completed"})
		})
	}
}

// Every failing step of the ESXi branch rewrites the host's agent config back to the source,
// runs Cleanup and then the compensations of the steps before it; after a Cleanup that ran
// forward the rewrite back prepares the host again and cleans up after itself.
func TestMigrateMachineESXiFailureCleansUp(t *testing.T) {
	tests := []struct {
		name     string
		agent    bool
		fail     string // ESXi activity that fails, or a region method
		wantActs []string
		wantErr  string // error type of the workflow failure's cause
		phase    string // where it failed
	}{
		{"prepare", false, prepare, seq(forward, []string{prepare, cleanup}, undo), "HostFailure", "repointing-agent"},
		{"rewrite", false, rewrite, seq(forward, []string{prepare, rewrite, rewrite, cleanup}, undo), "HostFailure", "repointing-agent"},
		{"agent check-in", true, waitAgent, seq(forward, []string{prepare, rewrite, waitAgent, rewrite, cleanup}, undo), activities.ErrTypeAgentCheckInTimeout, "repointing-agent"},
		{"cleanup", false, cleanup, seq(forward, []string{prepare, rewrite, cleanup, rewrite, cleanup}, undo), "HostFailure", "repointing-agent"},
		// Cleanup removed the temporary key: the rewrite back installs one again.
		{"activate after cleanup", false, "Activate", seq(forward, []string{prepare, rewrite, cleanup, "Activate", "IsActive", prepare, rewrite, cleanup}, undo), activities.ErrTypeRegionRefused, "activating"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			h := f.withESXi(tt.agent, tt.fail)
			switch tt.fail {
			case waitAgent:
				f.env.OnActivity(a.WaitForAgentCheckIn, mock.Anything, mock.Anything).Return(
					temporal.NewNonRetryableApplicationError("agent did not check in", activities.ErrTypeAgentCheckInTimeout, nil))
			case "Activate":
				f.west.Fail("Activate", 422, -1)
			}
			_, err := f.run(input())
			if err == nil {
				t.Fatal("workflow succeeded")
			}
			if typ := errorType(err); typ != tt.wantErr {
				t.Errorf("error type %q, want %q: %v", typ, tt.wantErr, err)
			}
			equal(t, "activities", f.activities, tt.wantActs)
			// The host's agent config ends pointing at the source, where the machine is live.
			if n := len(h.rewritten); n > 0 && h.rewritten[n-1].Endpoint != "https://east.example:5240" {
				t.Errorf("last agent config rewrite to %s, want the source", h.rewritten[n-1].Endpoint)
			}
			f.forgetESXi()
			f.assertUntouched()
			if p := f.progress(); p.Phase != workflows.PhaseFailed || len(p.Errors) != 1 || !strings.HasPrefix(p.Errors[0], tt.phase+": ") {
				t.Errorf("progress %+v", p)
			}
		})
	}
}

func TestMigrateMachineESXiCancelCleansUp(t *testing.T) {
	tests := []struct {
		name     string
		slow     string // the ESXi activity running when the cancel comes
		wantActs []string
	}{
		{"during prepare", prepare, seq(forward, []string{prepare, cleanup}, undo)},
		{"during rewrite", rewrite, seq(forward, []string{prepare, rewrite, rewrite, cleanup}, undo)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.east.Update(u, func(m *api.Machine) { m.OS, m.Address = "esxi", "10.0.0.5" })
			var cleaned int
			var prepared esxi.Prepared
			f.env.OnActivity(a.ESXiPrepare, mock.Anything, mock.Anything).After(delayIf(tt.slow == prepare)).Return(prepared, nil)
			f.env.OnActivity(a.ESXiRewriteAgentConfig, mock.Anything, mock.Anything).After(delayIf(tt.slow == rewrite)).Return(nil)
			f.env.OnActivity(a.ESXiCleanup, mock.Anything, mock.Anything).Return(func(context.Context, activities.ESXiInput) error {
				cleaned++
				return nil
			})
			f.env.RegisterDelayedCallback(f.env.CancelWorkflow, time.Minute)
			_, err := f.run(input())
			if !temporal.IsCanceledError(err) {
				t.Fatalf("want a cancelled workflow, got %v", err)
			}
			equal(t, "activities", f.activities, tt.wantActs)
			if cleaned != 1 {
				t.Errorf("Cleanup ran %d times, want 1", cleaned)
			}
			f.forgetESXi()
			f.assertUntouched()
			if p := f.progress(); p.Phase != workflows.PhaseCanceled {
				t.Errorf("progress %+v", p)
			}
		})
	}
}

func delayIf(slow bool) time.Duration {
	if slow {
		return time.Hour
	}
	return 0
}
