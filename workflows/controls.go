package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/region/api"
)

// The operator's controls of a running bulk migration or rack transfer: Updates
// that pause it (it starts no new machine, batch or child; those running finish), resume it,
// and change how many machines run at once from the next start on.
const (
	PauseUpdate     = "pause"
	ResumeUpdate    = "resume"
	SetWindowUpdate = "set-window"
)

// controlsChange is the GetVersion change ID of the operator's controls: runs recorded
// before it have no handlers for their Updates.
const controlsChange = "operator-controls"

// ControlRequest is the argument of PauseUpdate, ResumeUpdate and SetWindowUpdate.
type ControlRequest struct {
	// Window is the new number of machines at once (SetWindowUpdate only), 1..MaxBulkWindow.
	Window int    `json:",omitempty"`
	By     string // who asks; the CLI fills in the caller's identity
}

// ControlState is the answer of every control Update: the run's controls after it.
type ControlState struct {
	Paused bool
	// Window is how many machines run at once from the next start on; 0: the default.
	Window int
}

// moveControls holds the operator's controls of one run. Its zero value is a run nobody
// paused, at its input's window; only runs of controlsChange register the Updates that
// change it, so the others never see it change.
type moveControls struct {
	state ControlState
	// inputWindow is the run's input's window (0: the default), in force until an operator
	// sets one.
	inputWindow int
	// wake is sent to when a change may let a run start more: the running loop selects on it.
	wake workflow.Channel
	// audit records an accepted request on the source region; nil until the Updates are
	// registered.
	audit func(ctx workflow.Context, action string, req ControlRequest)
}

// register registers the control Updates when the run takes the controlsChange path.
// source is the run's source region, id the workflow ID its audits name.
func (c *moveControls) register(ctx workflow.Context, source, id string, inputWindow int) error {
	c.inputWindow = inputWindow
	c.wake = workflow.NewBufferedChannel(ctx, 1)
	if workflow.GetVersion(ctx, controlsChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	c.audit = func(ctx workflow.Context, action string, req ControlRequest) {
		in := activities.MoveControlAuditInput{Region: source, Control: api.MoveControl{Migration: id, Action: action, Window: req.Window, By: req.By}}
		if err := call(ctx, regionCallOptions, acts.AuditMoveControl, in, nil); err != nil {
			workflow.GetLogger(ctx).Error("audit of an operator control failed", "action", action, "error", err)
		}
	}
	for _, u := range []struct {
		action, description string
		validate            func(ControlRequest) error
	}{
		{PauseUpdate, pauseDescription, c.validatePause},
		{ResumeUpdate, resumeDescription, c.validateResume},
		{SetWindowUpdate, setWindowDescription, c.validateWindow},
	} {
		action, validate := u.action, u.validate
		handler := func(ctx workflow.Context, req ControlRequest) (ControlState, error) {
			return c.apply(ctx, action, req), nil
		}
		validator := func(_ workflow.Context, req ControlRequest) error {
			return refusal(errors.Join(req.check(), validate(req)))
		}
		if err := workflow.SetUpdateHandlerWithOptions(ctx, action, handler, workflow.UpdateHandlerOptions{Validator: validator, Description: u.description}); err != nil {
			return fmt.Errorf("register %s update: %w", action, err)
		}
	}
	return nil
}

func (r ControlRequest) check() error {
	if strings.TrimSpace(r.By) == "" {
		return errors.New("who asks (By) is required")
	}
	return nil
}

func (c *moveControls) validatePause(ControlRequest) error {
	if c.state.Paused {
		return errors.New("the run is already paused")
	}
	return nil
}

func (c *moveControls) validateResume(ControlRequest) error {
	if !c.state.Paused {
		return errors.New("the run is not paused")
	}
	return nil
}

func (c *moveControls) validateWindow(req ControlRequest) error {
	if err := CheckWindow(req.Window); err != nil {
		return err
	}
	if req.Window == c.current().Window {
		return fmt.Errorf("the run's window is already %d", req.Window)
	}
	return nil
}

// refusal is an Update validator's error err as the operator reads it: a non-retryable
// ApplicationError whose message is err's; nil stays nil.
func refusal(err error) error {
	if err == nil {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeUpdateRefused, nil)
}

// CheckWindow refuses a window the set-window Update refuses.
func CheckWindow(window int) error {
	if window < 1 || window > MaxBulkWindow {
		return fmt.Errorf("window %d is not between 1 and %d", window, MaxBulkWindow)
	}
	return nil
}

// apply changes the state at once, so the run's next start sees it, then audits the request.
func (c *moveControls) apply(ctx workflow.Context, action string, req ControlRequest) ControlState {
	switch action {
	case PauseUpdate:
		c.state.Paused = true
	case ResumeUpdate:
		c.state.Paused = false
	case SetWindowUpdate:
		c.state.Window = req.Window
	}
	state := c.current()
	workflow.GetLogger(ctx).Warn("operator control", "action", action, "by", req.By, "paused", state.Paused, "window", state.Window)
	c.wake.SendAsync(struct{}{})
	c.audit(ctx, action, req)
	return state
}

// windowOr is the window the operator set, or def when none was set.
func (c *moveControls) windowOr(def int) int {
	if c.state.Window > 0 {
		return c.state.Window
	}
	return def
}

// current is the run's controls as an operator sees them: the window in force.
func (c *moveControls) current() ControlState {
	return ControlState{Paused: c.state.Paused, Window: c.windowOr(c.inputWindow)}
}

// finish waits for the control Updates still running (their audits) before the run ends.
func (c *moveControls) finish(ctx workflow.Context) {
	if c.audit == nil {
		return
	}
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}
