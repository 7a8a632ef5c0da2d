package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// Attempt fences. A step of a migration may name the attempt of the batch activity that makes
// it (api.Attempt): the region records the newest attempt that acted on each machine for its
// migration (migration_fences) and refuses a step of that migration from an older one, which
// the server timed out while its call was in flight: its retry owns the machine and may have
// moved it past what the stale step would change. A step naming no attempt (the per-machine
// path, older workers, operators) is not fenced and leaves the record alone.

// ErrStaleAttempt is the class of a step refused because a newer attempt of its migration acted
// on the machine; errors.Is(err, ErrConflict) holds too (409).
var ErrStaleAttempt = errors.New("stale attempt")

type staleAttemptError struct{ msg string }

func (e *staleAttemptError) Error() string { return e.msg }

func (e *staleAttemptError) Is(target error) bool {
	return target == ErrStaleAttempt || target == ErrConflict
}

type attemptCtxKey struct{}

// ForAttempt marks ctx as a step made by attempt a of the migration ForMigration (or the
// step's own body) names. A zero a marks nothing.
func ForAttempt(ctx context.Context, a api.Attempt) context.Context {
	if a.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, attemptCtxKey{}, a)
}

func attemptOf(ctx context.Context) api.Attempt {
	a, _ := ctx.Value(attemptCtxKey{}).(api.Attempt)
	return a
}

// fence records ctx's attempt as the newest to act on machine for migration, or refuses the
// step when a newer attempt of migration did. A fence of another migration is replaced: that
// migration no longer holds the machine, or the step's own hold check has refused it already.
// It runs in the step's transaction, so a refused or failed step records nothing.
func fence(ctx context.Context, q querier, machine, name, migration string) error {
	a := attemptOf(ctx)
	if a.IsZero() {
		return nil
	}
	if migration == "" {
		return invalidf("attempt %s names no migration: a fenced step names the migration it is made for", a)
	}
	tag, err := q.Exec(ctx, `INSERT INTO migration_fences (machine, migration, attempt_started, attempt) VALUES ($1::uuid, $2, $3, $4)
		ON CONFLICT (machine) DO UPDATE SET migration = excluded.migration, attempt_started = excluded.attempt_started,
			attempt = excluded.attempt, seen_at = now()
		WHERE migration_fences.migration <> excluded.migration
			OR (migration_fences.attempt_started, migration_fences.attempt) <= (excluded.attempt_started, excluded.attempt)`,
		machine, migration, a.Started.UnixNano(), a.Number)
	if err != nil || tag.RowsAffected() == 1 {
		return err
	}
	held, err := fenceOf(ctx, q, machine)
	if err != nil {
		return err
	}
	return &staleAttemptError{msg: fmt.Sprintf("machine %s (%s): attempt %s of migration %s has acted on it; this step of the older attempt %s is refused, "+
		"that attempt no longer owns the machine", name, machine, held, migration, a)}
}

// fenceOf returns the newest attempt recorded for machine, zero when none.
func fenceOf(ctx context.Context, q querier, machine string) (api.Attempt, error) {
	var started int64
	var n int32
	err := q.QueryRow(ctx, "SELECT attempt_started, attempt FROM migration_fences WHERE machine = $1::uuid", machine).Scan(&started, &n)
	if err != nil {
		return api.Attempt{}, err
	}
	return api.Attempt{Started: time.Unix(0, started).UTC(), Number: n}, nil
}

// fenceDelete fences the delete of m for a migration; an operator's delete, which names no
// migration, takes the machine's fence with it, so the table keeps no row for a machine gone
// for good. A migration's delete keeps it: a stale import must not bring the copy back.
func fenceDelete(ctx context.Context, q querier, m *api.Machine) error {
	migration := actingFor(ctx)
	if migration != "" || !attemptOf(ctx).IsZero() {
		return fence(ctx, q, m.Uuid, m.Name, migration)
	}
	_, err := q.Exec(ctx, "DELETE FROM migration_fences WHERE machine = $1::uuid", m.Uuid)
	return err
}
