package power

import (
	"context"
	"fmt"

	"github.com/ironflow/ironflow/region/api"
)

// Manual is the driver of a machine without a BMC Ironflow drives: every action is reported as
// needing an operator (the region audits it), and its state is unknown.
type Manual struct{ Machine string }

// OpenManual is the Opener of api.PowerTypeManual.
func OpenManual(_ context.Context, cred api.PowerCredential) (Driver, error) {
	return Manual{Machine: cred.Machine}, nil
}

func (m Manual) ask(what string) error {
	return fmt.Errorf("machine %s has power type manual: %s it by hand: %w", m.Machine, what, ErrNeedsOperator)
}

func (m Manual) On(context.Context) error    { return m.ask("power on") }
func (m Manual) Off(context.Context) error   { return m.ask("power off") }
func (m Manual) Cycle(context.Context) error { return m.ask("power cycle") }

func (Manual) Status(context.Context) (api.PowerStatus, error) { return api.PowerStateUnknown, nil }

func (m Manual) SetPXEBoot(context.Context) error {
	return fmt.Errorf("machine %s has power type manual: %w", m.Machine, ErrUnsupported)
}

func (Manual) Close() error { return nil }
