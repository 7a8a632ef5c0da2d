package activities

import (
	"context"

	"github.com/ironflow/ironflow/region/api"
)

// ErrLastCopy is the error type of an undo that refused to run because it would destroy the
// only remaining copy of a machine: the workflow stops undoing and keeps that copy.
const ErrLastCopy = "LastCopy"

// UndoCopyInput names both ends of a copy to undo.
type UndoCopyInput struct {
	Source MachineRef
	Target MachineRef
	// RedirectBack turns the target's copy into a stub redirecting to the source instead of
	// deleting it: the source may already have sent the machine's agent to the target
	// (FinalizeMigration ran), and the stub sends it back.
	RedirectBack bool
}

// UndoCopy undoes ExportImport once the source holds the machine's live record again. It
// never removes the last copy: a source that lost the machine, or still holds only its
// stub, makes it refuse with ErrLastCopy. It never touches an active copy (ErrTypeUnsafeDelete),
// and a copy already a stub, or gone, is done.
func (a *Activities) UndoCopy(ctx context.Context, in UndoCopyInput) error {
	src, sm, err := a.machine(ctx, in.Source)
	switch {
	case isNotFound(err):
		return nonRetryable(ErrLastCopy, "machine %s is gone from the source %s: keeping its copy on %s", in.Source.Machine, in.Source.Region, in.Target.Region)
	case err != nil:
		return err
	case isRedirectStub(sm):
		return nonRetryable(ErrLastCopy, "machine %s is still a stub on the source %s redirecting to %s: keeping its copy on %s", in.Source.Machine, in.Source.Region, sm.Meta[api.MetaRedirectEndpoint], in.Target.Region)
	}
	dst, tm, err := a.machine(ctx, in.Target)
	switch {
	case isNotFound(err):
		return nil
	case err != nil:
		return err
	case isRedirectStub(tm):
		return nil
	case tm.Runnable:
		return nonRetryable(ErrTypeUnsafeDelete, "machine %s is active on %s; not undoing its copy", in.Target.Machine, in.Target.Region)
	case !in.RedirectBack:
		return a.deleteMachine(ctx, dst, in.Target)
	}
	info, err := src.Info(ctx)
	if err != nil {
		return classify(err, "region %s info", in.Source.Region)
	}
	_, err = dst.RedirectCopy(ctx, in.Target.Machine, api.RedirectCopyRequest{RedirectEndpoint: info.URL, Migration: in.Target.Migration})
	return classify(err, "turn the copy of machine %s on %s into a stub redirecting to %s", in.Target.Machine, in.Target.Region, info.URL)
}
