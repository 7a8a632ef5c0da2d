package moves

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/workflows"
)

// Memo keys of a bulk migration schedule: what ListSchedules shows. Temporal keeps a cron
// spec only in its compiled form, so the expression the user wrote is kept here.
const (
	memoCron  = "cron"
	memoInput = "input"
)

// Errors of the schedule calls.
var (
	ErrScheduleExists = errors.New("schedule exists")
	ErrNoSchedule     = errors.New("no such schedule")
)

// InvalidSpecError is a cron spec Temporal refused.
type InvalidSpecError struct{ Message string }

func (e *InvalidSpecError) Error() string { return e.Message }

// ScheduleCatchupWindow is how late a scheduled bulk migration may still start after the
// Temporal server was down at its time: a missed 02:00 run is skipped by morning instead of
// moving machines at noon (the server's default is a year).
const ScheduleCatchupWindow = 30 * time.Minute

// CreateSchedule creates the schedule bulk-migrate/name, which starts the bulk migration in
// at each time of cron; a run still going at the next time makes that time be skipped.
// A schedule of that name makes it fail with ErrScheduleExists, a spec Temporal refuses with
// an *InvalidSpecError.
func CreateSchedule(ctx context.Context, tc client.Client, name, cron string, in workflows.BulkMigrateInput) error {
	if err := CheckName(name); err != nil {
		return err
	}
	id := workflows.BulkMigrateID(name)
	_, err := tc.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:   id,
		Spec: client.ScheduleSpec{CronExpressions: []string{cron}},
		Action: &client.ScheduleWorkflowAction{
			ID:                    id,
			Workflow:              Bulk.Workflow,
			Args:                  []any{in},
			TaskQueue:             workflows.TaskQueue,
			TypedSearchAttributes: bulkSearchAttributes(in),
		},
		Overlap:       enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		CatchupWindow: ScheduleCatchupWindow,
		Memo:          map[string]any{memoCron: cron, memoInput: in},
	})
	var invalid *serviceerror.InvalidArgument
	switch {
	case errors.Is(err, temporal.ErrScheduleAlreadyRunning):
		return ErrScheduleExists
	case errors.As(err, &invalid) && strings.Contains(invalid.Message, "schedule spec"):
		return &InvalidSpecError{Message: invalid.Message}
	}
	return err
}

// Schedule is one bulk migration schedule.
type Schedule struct {
	Name           string                     `json:"Name"`
	ScheduleID     string                     `json:"ScheduleID"`
	Cron           string                     `json:"Cron"`
	Paused         bool                       `json:"Paused"`
	NextRun        time.Time                  `json:"NextRun,omitzero"`
	LastRun        time.Time                  `json:"LastRun,omitzero"`
	LastWorkflowID string                     `json:"LastWorkflowID,omitempty"`
	Input          workflows.BulkMigrateInput `json:"Input"`
}

// ListSchedules returns the bulk migration schedules by name; other schedules of the
// namespace are left out.
func ListSchedules(ctx context.Context, tc client.Client, dc converter.DataConverter) ([]Schedule, error) {
	it, err := tc.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	prefix := workflows.BulkMigrateID("")
	list := []Schedule{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		if !strings.HasPrefix(e.ID, prefix) {
			continue
		}
		s := Schedule{Name: strings.TrimPrefix(e.ID, prefix), ScheduleID: e.ID, Paused: e.Paused}
		if len(e.NextActionTimes) > 0 {
			s.NextRun = e.NextActionTimes[0]
		}
		if n := len(e.RecentActions); n > 0 {
			s.LastRun = e.RecentActions[n-1].ActualTime
			if w := e.RecentActions[n-1].StartWorkflowResult; w != nil {
				s.LastWorkflowID = w.WorkflowID
			}
		}
		fields := e.Memo.GetFields()
		if p := fields[memoCron]; p != nil {
			_ = dc.FromPayload(p, &s.Cron) // a memo written by hand shows empty
		}
		if p := fields[memoInput]; p != nil {
			_ = dc.FromPayload(p, &s.Input)
		}
		s.Input = redactBulk(s.Input)
		list = append(list, s)
	}
	slices.SortFunc(list, func(a, b Schedule) int { return strings.Compare(a.Name, b.Name) })
	return list, nil
}

// DeleteSchedule deletes schedule name and returns the grant its bulk migration carried
// (empty if its memo does not say), for the caller to revoke; running bulk migrations go on.
func DeleteSchedule(ctx context.Context, tc client.Client, dc converter.DataConverter, name string) (grant string, err error) {
	err = onSchedule(ctx, tc, name, func(h client.ScheduleHandle) error {
		if in, err := scheduleInput(ctx, h, dc); err == nil {
			grant = in.Grant
		}
		return h.Delete(ctx)
	})
	return grant, err
}

// ScheduleInput is the input of schedule name's bulk migrations, its grant redacted.
func ScheduleInput(ctx context.Context, tc client.Client, dc converter.DataConverter, name string) (in workflows.BulkMigrateInput, err error) {
	err = onSchedule(ctx, tc, name, func(h client.ScheduleHandle) error {
		in, err = scheduleInput(ctx, h, dc)
		return err
	})
	return redactBulk(in), err
}

// scheduleInput reads the input a schedule's memo records.
func scheduleInput(ctx context.Context, h client.ScheduleHandle, dc converter.DataConverter) (workflows.BulkMigrateInput, error) {
	var in workflows.BulkMigrateInput
	desc, err := h.Describe(ctx)
	if err != nil {
		return in, err
	}
	p := desc.Memo.GetFields()[memoInput]
	if p == nil {
		return in, fmt.Errorf("schedule %s records no input in its memo", h.GetID())
	}
	if err := dc.FromPayload(p, &in); err != nil {
		return in, fmt.Errorf("input of schedule %s: %w", h.GetID(), err)
	}
	return in, nil
}

// TriggerSchedule starts schedule name's bulk migration now (skipped while one still runs).
func TriggerSchedule(ctx context.Context, tc client.Client, name string) error {
	return onSchedule(ctx, tc, name, func(h client.ScheduleHandle) error {
		return h.Trigger(ctx, client.ScheduleTriggerOptions{})
	})
}

// onSchedule runs do on schedule name; an unknown schedule is ErrNoSchedule.
func onSchedule(ctx context.Context, tc client.Client, name string, do func(client.ScheduleHandle) error) error {
	if err := CheckName(name); err != nil {
		return err
	}
	err := do(tc.ScheduleClient().GetHandle(ctx, workflows.BulkMigrateID(name)))
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return ErrNoSchedule
	}
	return err
}
