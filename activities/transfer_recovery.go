package activities

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"go.temporal.io/sdk/activity"

	"github.com/ironflow/ironflow/region/api"
)

// Recovery of what a closed TransferRack run left of a rack (region/api/transfer_recovery.go).
// A terminated transfer runs none of its undos: its rack stays paused on the source, and its
// copy stays on the target. Each region records which run holds the rack there; the next
// transfer of the rack, or RecoverRackTransfer, runs under the rack's one workflow ID, so a
// hold of any other run of that ID belongs to a run that has closed, and these activities
// undo it (the rack still serves from the source) or finish it (it serves from the target).

// ErrTypeRackHeldElsewhere: the rack is held by a workflow that is not the rack's transfer
// workflow (a start under another ID, from before IDs were checked): nothing is recovered.
const ErrTypeRackHeldElsewhere = "RackHeldElsewhere"

// transferHold is the hold of the transfer run calling the activity.
func transferHold(ctx context.Context, from, to string) api.RackHold {
	if !activity.IsActivity(ctx) {
		return api.RackHold{}
	}
	run := activity.GetInfo(ctx).WorkflowExecution
	return api.RackHold{Transfer: run.ID, Run: run.RunID, From: from, To: to}
}

// RackLeftoverQuery names the rack and the regions to look at first; the holds found there
// name the other region of their run, which is looked at too.
type RackLeftoverQuery struct {
	Rack    string // UUID
	Regions []string
	// Transfer is the transfer asking, if one: its grant is verified with its source before
	// any leftover is reported, since recovering one changes both regions. Nil for
	// RecoverRackTransfer, which the CLI starts for an operator of the region.
	Transfer *TransferInput `json:",omitempty"`
}

// RackLeftover is what one closed transfer run left of the rack.
type RackLeftover struct {
	Rack     string
	Transfer string // workflow ID
	Run      string
	From, To string
	// SourceHold and TargetHold are the run's holds as recorded on From and To; zero where
	// the run holds nothing (not paused yet, no copy, or already recovered).
	SourceHold, TargetHold api.RackHold
	// SourceExists: the rack is still registered on From, held or not (a hand-over removes it).
	SourceExists bool
	// TargetRegistered: the rack controller registered with To (the copy there has region
	// endpoints): the run's repoint began, and only the rack can say where it serves from.
	TargetRegistered bool
}

// NeedsRackState reports a leftover whose rack may serve from either region.
func (l RackLeftover) NeedsRackState() bool {
	return !l.TargetHold.IsZero() && l.TargetRegistered && l.SourceExists
}

// Finished reports a leftover whose rack serves from the target for sure: the source handed
// it over (it is gone there) while the target still holds its copy.
func (l RackLeftover) Finished() bool {
	return !l.TargetHold.IsZero() && !l.SourceExists
}

// RackLeftovers are the leftovers FindRackLeftovers found.
type RackLeftovers struct {
	Leftovers []RackLeftover
	StartedBy string // who the query's grant was issued to, when it had one and found leftovers
}

// FindRackLeftovers reads the rack on the regions of q, and on the other region of every hold
// found, and returns the leftovers of runs of this workflow ID other than the calling one. A
// hold of another workflow is refused (non-retryable), recovering nothing.
func (a *Activities) FindRackLeftovers(ctx context.Context, q RackLeftoverQuery) (RackLeftovers, error) {
	self := transferHold(ctx, "", "")
	if want := TransferRackID(q.Rack); self.Transfer != want {
		// Only the rack's one workflow ID proves that the runs holding it have closed.
		return RackLeftovers{}, nonRetryable(ErrNonCanonicalWorkID, "the transfer or recovery of rack %s runs as workflow %q; start it as %q", q.Rack, self.Transfer, want)
	}
	found := map[string]*api.Rack{} // by region; nil: no rack there
	queue := slices.Clone(q.Regions)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if _, seen := found[name]; seen || name == "" {
			continue
		}
		r, err := a.rackRegion(name)
		if err != nil {
			return RackLeftovers{}, err
		}
		rack, err := r.GetRack(ctx, q.Rack)
		switch {
		case isNotFound(err):
			found[name] = nil
			continue
		case err != nil:
			return RackLeftovers{}, classify(err, "read rack %s on %s", q.Rack, name)
		}
		found[name] = &rack
		if h := api.RackHoldOf(rack); !h.IsZero() {
			queue = append(queue, h.From, h.To)
		}
	}
	byRun := map[string]*RackLeftover{}
	for name, rack := range found {
		h := api.RackHold{}
		if rack != nil {
			h = api.RackHoldOf(*rack)
		}
		switch {
		case h.IsZero() || h.Run == self.Run:
			continue
		case h.Transfer != self.Transfer:
			return RackLeftovers{}, nonRetryable(ErrTypeRackHeldElsewhere, "rack %s on %s is held by workflow %s (run %s), not by %s: check that run with Temporal and recover the rack by hand",
				rack.Name, name, h.Transfer, h.Run, self.Transfer)
		}
		l := byRun[h.Run]
		if l == nil {
			l = &RackLeftover{Rack: q.Rack, Transfer: h.Transfer, Run: h.Run}
			byRun[h.Run] = l
		}
		l.From, l.To = cmp.Or(l.From, h.From), cmp.Or(l.To, h.To)
		if h.Role == api.TransferTarget {
			l.TargetHold, l.TargetRegistered = h, len(rack.RegionEndpoints) > 0
		} else {
			l.SourceHold = h
		}
	}
	var out RackLeftovers
	for _, l := range byRun {
		l.SourceExists = found[l.From] != nil
		out.Leftovers = append(out.Leftovers, *l)
	}
	slices.SortFunc(out.Leftovers, func(a, b RackLeftover) int { return strings.Compare(a.Run, b.Run) })
	if len(out.Leftovers) > 0 && q.Transfer != nil {
		var err error
		if out.StartedBy, err = a.verifyRackGrant(ctx, *q.Transfer); err != nil {
			return RackLeftovers{}, err
		}
	}
	return out, nil
}

// verifyRackGrant has the source of in verify its grant; it returns who the grant was issued
// to.
func (a *Activities) verifyRackGrant(ctx context.Context, in TransferInput) (string, error) {
	src, err := a.rackRegion(in.SourceRegion)
	if err != nil {
		return "", err
	}
	return verifyGrant(ctx, src, in.SourceRegion, api.GrantCheck{Grant: in.Grant, TargetRegion: in.TargetRegion, Kind: api.GrantRack, Key: in.Rack, Migration: workflowID(ctx)})
}

// RackRecoveryStep is one leftover and what to make of it.
type RackRecoveryStep struct {
	Leftover RackLeftover
	// Finish the move (the rack serves from the target) rather than undo it.
	Finish    bool
	StartedBy string `json:",omitempty"` // who asked for the recovery, for the audit events
}

// RackRecoveryResult lists the actions the regions took, "region: action".
type RackRecoveryResult struct {
	Actions []string
}

// RecoverRackLeftover undoes a leftover (deletes the copy on the target, then ends the pause
// on the source) or finishes it (hands the rack over on the source, hands its queued
// operations over to the target and ends the pause there). Each region audits what it did;
// every call is idempotent, so a retry redoes nothing.
func (a *Activities) RecoverRackLeftover(ctx context.Context, step RackRecoveryStep) (RackRecoveryResult, error) {
	l := step.Leftover
	var res RackRecoveryResult
	outcome := api.RecoveryUndone
	if step.Finish {
		outcome = api.RecoveryFinished
	}
	self := transferHold(ctx, "", "")
	act := func(region string, hold api.RackHold, action string) error {
		if hold.IsZero() {
			return nil
		}
		r, err := a.rackRegion(region)
		if err != nil {
			return err
		}
		done, err := r.RecoverRackTransfer(ctx, l.Rack, api.RackRecovery{Hold: hold, Action: action, Outcome: outcome,
			RecoveredBy: self.Transfer + " run " + self.Run, StartedBy: step.StartedBy})
		if err != nil {
			return classify(err, "%s rack %s on %s for closed transfer run %s", action, l.Rack, region, l.Run)
		}
		if done.Done {
			res.Actions = append(res.Actions, region+": "+action)
		}
		return nil
	}
	if !step.Finish {
		if err := act(l.To, l.TargetHold, api.RecoverDeleteCopy); err != nil {
			return res, err
		}
		return res, act(l.From, l.SourceHold, api.RecoverUnpause)
	}
	if err := act(l.From, l.SourceHold, api.RecoverHandOver); err != nil {
		return res, err
	}
	if l.TargetHold.IsZero() {
		return res, nil
	}
	src, dst, err := a.rackRegions(l.From, l.To)
	if err != nil {
		return res, err
	}
	if _, err := handOverOperations(ctx, src, dst, l.From, l.To, l.Rack); err != nil {
		return res, err
	}
	return res, act(l.To, l.TargetHold, api.RecoverUnpause)
}
