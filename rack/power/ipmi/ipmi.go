// Package ipmi is the IPMI v2.0 (RMCP+, "lanplus") power driver over UDP, on
// github.com/bougou/go-ipmi.
package ipmi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	ipmiclient "github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/chassis"
	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/ironflow/ironflow/rack/power"
	"github.com/ironflow/ironflow/region/api"
)

// Bounds of one BMC exchange: a BMC that does not answer a datagram within TryTimeout is asked
// again, Retries times, so an unreachable BMC fails in about TryTimeout × (Retries+1) per
// request (6 s), and a whole action (session, boot device, control, status) well within a
// minute.
const (
	TryTimeout = 2 * time.Second
	Retries    = 2
)

// bmc is what the driver uses of go-ipmi's client; the tests give a fake.
type bmc interface {
	Connect(ctx context.Context) error
	Close(ctx context.Context) error
	ChassisControl(ctx context.Context, control chassis.ChassisControl) (*chassis.ChassisControlResponse, error)
	GetChassisStatus(ctx context.Context) (*chassis.GetChassisStatusResponse, error)
	SetBootDevice(ctx context.Context, dev types.BootDeviceSelector, bootType types.BIOSBootType, persist bool) error
}

// Driver is one machine's BMC, with an open session.
type Driver struct {
	addr string // host:port, for messages
	c    bmc
}

// Open is the power.Opener of api.PowerTypeIPMI: it opens a session with the BMC at
// cred.Address as cred.User. A BMC refusing the credentials is power.ErrRefused; one that does
// not answer, power.ErrUnreachable.
func Open(ctx context.Context, cred api.PowerCredential) (power.Driver, error) {
	host, port, err := splitAddress(cred.Address)
	if err != nil {
		return nil, fmt.Errorf("BMC of machine %s: %w: %w", cred.Machine, power.ErrRefused, err)
	}
	c, err := ipmiclient.NewClient(host, port, cred.User, cred.Password)
	if err != nil {
		return nil, fmt.Errorf("BMC %s: %w: %w", cred.Address, power.ErrRefused, err)
	}
	c.WithTimeout(TryTimeout).WithRetry(Retries)
	return open(ctx, cred.Address, c)
}

func open(ctx context.Context, addr string, c bmc) (*Driver, error) {
	if err := c.Connect(ctx); err != nil {
		return nil, fmt.Errorf("BMC %s: %w", addr, classify(connectError(err)))
	}
	return &Driver{addr: addr, c: c}, nil
}

func splitAddress(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return host, port, nil
}

// connectError tells a BMC that never answered from one that answered and refused the
// session: go-ipmi's first exchange (Get Channel Authentication Capabilities) needs no
// credentials, so a failure after it is the BMC's refusal of the user or password.
func connectError(err error) error {
	if isTimeout(err) || strings.Contains(err.Error(), "Get Channel Authentication Capabilities failed") {
		return fmt.Errorf("%w: %w", power.ErrUnreachable, err)
	}
	// go-ipmi's answer lists every cipher suite it tried; the operator needs the verdict.
	return fmt.Errorf("%w: the BMC refused the session (wrong user or password)", power.ErrRefused)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// classify marks an answered refusal (an IPMI completion code) ErrRefused and a silence
// ErrUnreachable, unless err is marked already.
func classify(err error) error {
	var rerr *types.ResponseError
	switch {
	case errors.Is(err, power.ErrRefused), errors.Is(err, power.ErrUnreachable):
		return err
	case errors.As(err, &rerr):
		return fmt.Errorf("%w: %w", power.ErrRefused, err)
	case isTimeout(err):
		return fmt.Errorf("%w: %w", power.ErrUnreachable, err)
	}
	return err
}

func (d *Driver) control(ctx context.Context, what string, c chassis.ChassisControl) error {
	if _, err := d.c.ChassisControl(ctx, c); err != nil {
		return fmt.Errorf("BMC %s: chassis power %s: %w", d.addr, what, classify(err))
	}
	return nil
}

// On powers the machine up; a machine already on is left as it is.
func (d *Driver) On(ctx context.Context) error {
	if on, err := d.isOn(ctx); err != nil || on {
		return err
	}
	return d.control(ctx, "on", chassis.ChassisControlPowerUp)
}

// Off is a hard power down; a machine already off is left as it is.
func (d *Driver) Off(ctx context.Context) error {
	if on, err := d.isOn(ctx); err != nil || !on {
		return err
	}
	return d.control(ctx, "off", chassis.ChassisControlPowerDown)
}

// Cycle powers a running machine down and up again, and a stopped one up (a BMC refuses a
// cycle of a machine that is off).
func (d *Driver) Cycle(ctx context.Context) error {
	on, err := d.isOn(ctx)
	if err != nil {
		return err
	}
	if !on {
		return d.control(ctx, "on", chassis.ChassisControlPowerUp)
	}
	return d.control(ctx, "cycle", chassis.ChassisControlPowerCycle)
}

func (d *Driver) isOn(ctx context.Context) (bool, error) {
	st, err := d.c.GetChassisStatus(ctx)
	if err != nil {
		return false, fmt.Errorf("BMC %s: chassis status: %w", d.addr, classify(err))
	}
	return st.PowerIsOn, nil
}

// Status reads the chassis power state.
func (d *Driver) Status(ctx context.Context) (api.PowerStatus, error) {
	on, err := d.isOn(ctx)
	switch {
	case err != nil:
		return api.PowerStateError, err
	case on:
		return api.PowerStateOn, nil
	}
	return api.PowerStateOff, nil
}

// SetPXEBoot sets the next boot (only) to PXE. A BMC answering with a completion code (ipmi_sim
// answers "Invalid data field") does not do it: power.ErrUnsupported.
func (d *Driver) SetPXEBoot(ctx context.Context) error {
	err := d.c.SetBootDevice(ctx, types.BootDeviceSelectorForcePXE, types.BIOSBootTypeLegacy, false)
	var rerr *types.ResponseError
	if errors.As(err, &rerr) {
		return fmt.Errorf("BMC %s: next boot from PXE: %w: %w", d.addr, power.ErrUnsupported, err)
	}
	if err != nil {
		return fmt.Errorf("BMC %s: next boot from PXE: %w", d.addr, classify(err))
	}
	return nil
}

// Close ends the session, within one try's timeout.
func (d *Driver) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), TryTimeout)
	defer cancel()
	return d.c.Close(ctx)
}
