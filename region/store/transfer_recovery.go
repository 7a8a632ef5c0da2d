package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// RecoverRackTransfer acts on a rack that rec.Hold, a transfer run that has closed, left held
// on this region (region/api/transfer_recovery.go): it ends the pause, deletes the copy the
// run imported, or hands the rack over, and records a transfer-recovered event naming the
// run, the action and who recovered it, in one transaction. A rack no longer held by
// rec.Hold (gone, or the action done already) is left alone (Done false), so retrying is
// safe; a rack another run holds is refused (ErrConflict). The caller vouches that the run
// has closed: TransferRack and RecoverRackTransfer run under the rack's one workflow ID, so
// any other run of it has.
func (s *Store) RecoverRackTransfer(ctx context.Context, by Principal, rackUUID string, rec api.RackRecovery) (api.RackRecovered, error) {
	if !isMove(ctx) {
		return api.RackRecovered{}, classed(ErrForbidden, "only a rack transfer or its recovery (`ironflow racks recover`) recovers a rack (the workers' calls, marked %s)", api.HeaderMove)
	}
	if rec.Hold.IsZero() || rec.Hold.Run == "" {
		return api.RackRecovered{}, invalidf("a recovery names the transfer run whose hold it ends (Hold.Transfer and Hold.Run)")
	}
	var done bool
	err := s.tx(ctx, func(tx pgx.Tx) error {
		r, err := rackByUUID(ctx, tx, rackUUID, true)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		held := api.RackHoldOf(*r.obj)
		switch {
		case held.IsZero():
			return nil
		case held != rec.Hold:
			return conflictf("rack %s is held by transfer %s (run %s, %s of %s→%s), not by run %s: nothing was recovered",
				r.obj.Name, held.Transfer, held.Run, held.Role, held.From, held.To, rec.Hold.Run)
		}
		if err := recoverRack(ctx, tx, by, r, rec.Action); err != nil {
			return err
		}
		done = true
		return recordEvent(ctx, tx, by, "transfer-recovered", api.KindRacks, r.obj.Uuid, map[string]any{
			"Transfer": held.Transfer, "Run": held.Run, "Role": held.Role, "From": held.From, "To": held.To,
			"Action": rec.Action, "Outcome": rec.Outcome, "RecoveredBy": rec.RecoveredBy, "StartedBy": rec.StartedBy})
	})
	if err != nil {
		return api.RackRecovered{}, err
	}
	return api.RackRecovered{Done: done}, nil
}

// recoverRack does action on the locked rack r.
func recoverRack(ctx context.Context, tx pgx.Tx, by Principal, r row[api.Rack], action string) error {
	switch action {
	case api.RecoverUnpause:
		_, err := writePaused(ctx, tx, by, r, false, api.RackHold{})
		return err
	case api.RecoverDeleteCopy:
		return undoRackImport(ctx, tx, by, r.obj.Uuid)
	case api.RecoverHandOver:
		return handOverRack(ctx, tx, by, r)
	}
	return invalidf("unknown recovery action %q; want %s, %s or %s", action, api.RecoverUnpause, api.RecoverDeleteCopy, api.RecoverHandOver)
}
