package moves

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/workflows"
)

// Run is one run of a move, as its execution info and search attributes describe it.
type Run struct {
	WorkflowID     string    `json:"WorkflowID"`
	RunID          string    `json:"RunID"`
	Status         string    `json:"Status"`
	StartTime      time.Time `json:"StartTime"`
	CloseTime      time.Time `json:"CloseTime,omitzero"`
	MachineUuid    string    `json:"MachineUuid"`
	MachineName    string    `json:"MachineName"`
	SourceRegion   string    `json:"SourceRegion"`
	TargetRegion   string    `json:"TargetRegion"`
	MigrationPhase string    `json:"MigrationPhase"`
	// Parent is the workflow ID of the move that started this one as its child (a batch's or
	// a machine's transfer or bulk run); empty for a move started on its own.
	Parent string `json:"Parent,omitempty"`
	// Type is the workflow type (Kind.Type).
	Type string `json:"-"`
}

// Running reports whether the run is still open.
func (r Run) Running() bool { return r.Status == StatusRunning }

// status is a workflow status with its name.
type status struct {
	name   string
	status enumspb.WorkflowExecutionStatus
}

// StatusRunning is the Status of an open run.
const StatusRunning = "running"

// statuses are the names of the workflow statuses, as Run.Status shows them.
var statuses = []status{
	{StatusRunning, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING},
	{"completed", enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED},
	{"failed", enumspb.WORKFLOW_EXECUTION_STATUS_FAILED},
	{"canceled", enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED},
	{"terminated", enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED},
	{"continued-as-new", enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW},
	{"timed-out", enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT},
}

func nameOfStatus(s enumspb.WorkflowExecutionStatus) string {
	for _, st := range statuses {
		if st.status == s {
			return st.name
		}
	}
	return strings.ToLower(s.String())
}

// StatusNames lists the status names, comma-separated.
func StatusNames() string {
	names := make([]string, len(statuses))
	for i, st := range statuses {
		names[i] = st.name
	}
	return strings.Join(names, ", ")
}

// Filter chooses machine migrations; empty fields choose all.
type Filter struct {
	Machine string // a machine UUID
	Status  string // a status name (StatusNames)
}

// FilterError is a Filter value that is not allowed; Field is "machine" or "status".
type FilterError struct{ Field, Value, Problem string }

func (e *FilterError) Error() string { return fmt.Sprintf("%s %q %s", e.Field, e.Value, e.Problem) }

// Query is the visibility query of the machine migrations f chooses. Its values are
// checked, not quoted, so they cannot change the query.
func (f Filter) Query() (string, error) {
	// A machine moves alone (MigrateMachine) or in a batch (MigrateMachineBatch).
	clauses := []string{fmt.Sprintf("WorkflowType IN ('%s', '%s')", Migration.Type(), Batch.Type())}
	if f.Machine != "" {
		if _, err := uuid.Parse(f.Machine); err != nil {
			return "", &FilterError{"machine", f.Machine, "is not a machine UUID"}
		}
		clauses[0] = fmt.Sprintf("((WorkflowType = '%s' AND %s = '%s') OR (WorkflowType = '%s' AND %s = '%s'))",
			Migration.Type(), workflows.MachineUuidKey.GetName(), f.Machine, Batch.Type(), workflows.MachineUuidsKey.GetName(), f.Machine)
	}
	if f.Status != "" {
		i := slices.IndexFunc(statuses, func(st status) bool { return st.name == f.Status })
		if i < 0 {
			return "", &FilterError{"status", f.Status, "is not a workflow status (want one of " + StatusNames() + ")"}
		}
		clauses = append(clauses, fmt.Sprintf("ExecutionStatus = '%s'", statuses[i].status))
	}
	return strings.Join(clauses, " AND "), nil
}

// List returns the machine migrations f chooses, newest first.
func List(ctx context.Context, tc client.Client, f Filter) ([]Run, error) {
	query, err := f.Query()
	if err != nil {
		return nil, err
	}
	list := []Run{}
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list migrations: %w", err)
		}
		for _, info := range resp.GetExecutions() {
			list = append(list, runOf(info))
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return list, nil
		}
	}
}

// Describe returns the latest run of workflow id; IsNotFound tells an unknown id.
func Describe(ctx context.Context, tc client.Client, id string) (Run, error) {
	desc, err := tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return Run{}, err
	}
	return runOf(desc.GetWorkflowExecutionInfo()), nil
}

// IsNotFound reports whether err says that Temporal has no such workflow.
func IsNotFound(err error) bool {
	var notFound *serviceerror.NotFound
	return errors.As(err, &notFound)
}

// Cancel asks the running move id to stop; it undoes the steps it has done.
func Cancel(ctx context.Context, tc client.Client, id string) error {
	return tc.CancelWorkflow(ctx, id, "")
}

// RefusedError is an Update (a compensation request, a pause…) the move refused.
type RefusedError struct {
	ID  string
	Err error
}

// Error names the move and the workflow's reason: an ApplicationError's message alone,
// without Temporal's type and retry decoration.
func (e *RefusedError) Error() string {
	reason := e.Err.Error()
	var app *temporal.ApplicationError
	if errors.As(e.Err, &app) {
		reason = app.Message()
	}
	return fmt.Sprintf("migration %s refused the request: %s", e.ID, reason)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Compensate sends req to the stuck compensation of migration id and returns its answer.
func Compensate(ctx context.Context, tc client.Client, id string, req workflows.CompensationRequest) (string, error) {
	return update[string](ctx, tc, id, workflows.CompensationUpdate, req)
}

// Pause stops the bulk migration or rack transfer id from starting machines; those running
// finish. It returns the run's controls after the pause.
func Pause(ctx context.Context, tc client.Client, id, by string) (workflows.ControlState, error) {
	return update[workflows.ControlState](ctx, tc, id, workflows.PauseUpdate, workflows.ControlRequest{By: by})
}

// Resume lets the paused bulk migration or rack transfer id start machines again.
func Resume(ctx context.Context, tc client.Client, id, by string) (workflows.ControlState, error) {
	return update[workflows.ControlState](ctx, tc, id, workflows.ResumeUpdate, workflows.ControlRequest{By: by})
}

// SetWindow has the bulk migration or rack transfer id run window machines at once from its
// next start on.
func SetWindow(ctx context.Context, tc client.Client, id string, window int, by string) (workflows.ControlState, error) {
	return update[workflows.ControlState](ctx, tc, id, workflows.SetWindowUpdate, workflows.ControlRequest{Window: window, By: by})
}

// update sends the Update name with arg to the running workflow id (its latest run) and
// returns its answer once the workflow has completed it; a refusal is a *RefusedError.
func update[R any](ctx context.Context, tc client.Client, id, name string, arg any) (R, error) {
	var answer R
	h, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: name, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return answer, err
	}
	if err := h.Get(ctx, &answer); err != nil {
		return answer, &RefusedError{ID: id, Err: err}
	}
	return answer, nil
}

// runOf reads a workflow's execution info and search attributes.
func runOf(info *workflowpb.WorkflowExecutionInfo) Run {
	r := Run{
		WorkflowID: info.GetExecution().GetWorkflowId(),
		RunID:      info.GetExecution().GetRunId(),
		Status:     nameOfStatus(info.GetStatus()),
		Type:       info.GetType().GetName(),
		Parent:     info.GetParentExecution().GetWorkflowId(),
	}
	if info.GetStartTime() != nil {
		r.StartTime = info.GetStartTime().AsTime()
	}
	if info.GetCloseTime() != nil {
		r.CloseTime = info.GetCloseTime().AsTime()
	}
	attrs := info.GetSearchAttributes().GetIndexedFields()
	for key, field := range map[temporal.SearchAttributeKeyKeyword]*string{
		workflows.MachineUuidKey:    &r.MachineUuid,
		workflows.MachineNameKey:    &r.MachineName,
		workflows.SourceRegionKey:   &r.SourceRegion,
		workflows.TargetRegionKey:   &r.TargetRegion,
		workflows.MigrationPhaseKey: &r.MigrationPhase,
	} {
		*field = keyword(attrs[key.GetName()])
	}
	if r.Type == Batch.Type() {
		r.MachineName = fmt.Sprintf("batch of %d", len(batchMachines(info)))
	}
	return r
}

// keyword decodes a keyword search attribute; a missing or undecodable one is empty.
func keyword(p *commonpb.Payload) string {
	var s string
	if p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &s)
	}
	return s
}
