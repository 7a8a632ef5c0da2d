package regiontest

import (
	"context"
	"net/http"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// fence is the newest attempt that acted on a machine, for its migration (region/store:
// fences.go, migration_fences): one per machine, outliving the hold, replaced by a step of
// another migration.
type fence struct {
	migration string
	attempt   api.Attempt
}

// checkFence refuses a step of migration made by ctx's attempt (client.ForAttempt) on machine
// when a newer attempt of migration acted on it. commit records the attempt: the step calls
// it once it succeeded, as the region's transaction records it only when the step commits.
func (r *Region) checkFence(ctx context.Context, m api.Machine, migration string) (commit func(), err error) {
	a := client.AttemptOf(ctx)
	if a.IsZero() {
		return func() {}, nil
	}
	if migration == "" {
		return nil, apiErr(http.StatusUnprocessableEntity, "attempt %s names no migration: a fenced step names the migration it is made for", a)
	}
	if f, ok := r.fences[m.Uuid]; ok && f.migration == migration && a.Before(f.attempt) {
		return nil, &client.APIError{StatusCode: http.StatusConflict, Reason: api.ReasonStaleAttempt,
			Message: "machine " + m.Name + " (" + m.Uuid + "): attempt " + f.attempt.String() + " of migration " + migration +
				" has acted on it; this step of the older attempt " + a.String() + " is refused, that attempt no longer owns the machine"}
	}
	return func() { r.fences[m.Uuid] = fence{migration: migration, attempt: a} }, nil
}

// fenced runs step after checkFence and commits the fence when step succeeds.
func fenced[T any](ctx context.Context, r *Region, m api.Machine, migration string, step func() (T, error)) (T, error) {
	commit, err := r.checkFence(ctx, m, migration)
	if err != nil {
		var zero T
		return zero, err
	}
	out, err := step()
	if err == nil {
		commit()
	}
	return out, err
}

// Fence returns the newest attempt recorded for machine and its migration, for tests.
func (r *Region) Fence(machine string) (migration string, attempt api.Attempt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.fences[machine]
	return f.migration, f.attempt
}
