// Package power drives a machine's power through its BMC or hypervisor, on the machine's rack.
// Callers open a Driver by the machine's power type (Drivers.Open) and call Apply; a new kind
// of BMC (Redfish) is one more Opener in the rack's Drivers, with no caller to change.
package power

import (
	"context"
	"errors"
	"fmt"

	"github.com/ironflow/ironflow/region/api"
)

// Driver powers one machine. Every call is bounded by the driver's own timeouts and ctx.
type Driver interface {
	On(ctx context.Context) error
	Off(ctx context.Context) error // a hard stop, as a pulled plug
	Cycle(ctx context.Context) error
	Status(ctx context.Context) (api.PowerStatus, error)
	// SetPXEBoot asks the machine to boot from the network next; ErrUnsupported when the BMC
	// refuses or cannot.
	SetPXEBoot(ctx context.Context) error
	Close() error
}

// Errors a driver wraps, so callers can tell what retrying fixes.
var (
	// ErrRefused: the BMC refused the request or its credentials; retrying changes nothing.
	ErrRefused = errors.New("refused by the BMC")
	// ErrUnreachable: nothing answered within the driver's timeouts.
	ErrUnreachable = errors.New("BMC unreachable")
	// ErrUnsupported: the BMC does not do this (a next-boot device, say).
	ErrUnsupported = errors.New("not supported by the BMC")
	// ErrNeedsOperator: the machine has no driver; a human must act (manual).
	ErrNeedsOperator = errors.New("needs an operator")
	// ErrUnknownType: no driver for the machine's power type.
	ErrUnknownType = errors.New("unknown power type")
)

// Opener opens a driver for one machine's credential.
type Opener func(ctx context.Context, cred api.PowerCredential) (Driver, error)

// Drivers maps power types to their openers.
type Drivers map[string]Opener

// Open opens the driver of cred.Type.
func (d Drivers) Open(ctx context.Context, cred api.PowerCredential) (Driver, error) {
	open, ok := d[cred.Type]
	if !ok {
		return nil, fmt.Errorf("machine %s: %w %q", cred.Machine, ErrUnknownType, cred.Type)
	}
	return open(ctx, cred)
}

// Outcome is what Apply did.
type Outcome struct {
	State api.PowerStatus
	// BootNote says why the next boot was not set to PXE before a power on or cycle ("" when it
	// was, or for off and status).
	BootNote string
}

// Apply runs action (on, off, cycle or status) with d and reads the state after it. Before on
// and cycle it asks for a network boot, which a BMC refusing it (ErrUnsupported) does not stop:
// the machine then boots as its firmware is set.
func Apply(ctx context.Context, d Driver, action api.PowerAction) (Outcome, error) {
	var out Outcome
	if action == api.PowerOn || action == api.PowerCycle {
		if err := d.SetPXEBoot(ctx); errors.Is(err, ErrUnsupported) {
			out.BootNote = err.Error()
		} else if err != nil {
			return out, err
		}
	}
	var err error
	switch action {
	case api.PowerOn:
		err = d.On(ctx)
	case api.PowerOff:
		err = d.Off(ctx)
	case api.PowerCycle:
		err = d.Cycle(ctx)
	case api.PowerStatusAction:
	default:
		return out, fmt.Errorf("power action %q: %w", action, ErrRefused)
	}
	if err != nil {
		return out, err
	}
	out.State, err = d.Status(ctx)
	return out, err
}
