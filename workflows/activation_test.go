package workflows_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

// An activation reported as failed may have taken effect all the same (the answer was lost).
// The workflow then looks at the target before it compensates: a live target keeps the source
// a locked stub (invariant 1) and the move completes, and a target it cannot read leaves
// everything as it is.
func TestMigrateMachineAmbiguousActivation(t *testing.T) {
	tests := []struct {
		name         string
		tookEffect   bool
		targetUnread bool
		wantType     string
		wantMsg      string
		wantActive   bool
		wantPhase    string
	}{
		{"took effect", true, false, "", "", true, workflows.PhaseCompleted},
		{"target unreadable", false, true, workflows.ErrTypeCompensationFailed, "nothing was undone, the source keeps its locked stub", false, workflows.PhaseFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.env.OnActivity(a.Activate, mock.Anything, mock.Anything).Return(func(ctx context.Context, ref activities.MachineRef) error {
				if tt.tookEffect {
					if _, err := f.west.ActivateFor(ctx, ref.Machine, ref.Migration); err != nil {
						return err
					}
				}
				if tt.targetUnread {
					f.west.Fail("GetMachine", http.StatusForbidden, -1)
				}
				return temporal.NewNonRetryableApplicationError("activation answer lost", "Lost", nil)
			})
			_, err := f.run(input())
			if typ := errorType(err); typ != tt.wantType || (err != nil && !strings.Contains(err.Error(), tt.wantMsg)) {
				t.Fatalf("got %q %v, want %q containing %q", typ, err, tt.wantType, tt.wantMsg)
			}
			equal(t, "activities", f.activities, []string{"ValidateMigration", "Quiesce", "ExportImport", "FinalizeMigration", "Activate", "IsActive"})
			stub, ok := f.east.Machine(u)
			if !ok || !stub.Locked || stub.Runnable || stub.Meta[api.MetaRedirectEndpoint] != "https://west.example:5240" {
				t.Errorf("source is no longer the locked stub: %+v (present %v)", stub, ok)
			}
			target, ok := f.west.Machine(u)
			if !ok || target.Runnable != tt.wantActive {
				t.Errorf("target machine: %+v (present %v), want Runnable=%v", target, ok, tt.wantActive)
			}
			if p := f.progress(); p.Phase != tt.wantPhase {
				t.Errorf("progress %+v", p)
			}
		})
	}
}
