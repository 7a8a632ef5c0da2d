package ipmi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/bougou/go-ipmi/pkg/command/chassis"
	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/ironflow/ironflow/rack/power"
	"github.com/ironflow/ironflow/region/api"
)

// fakeBMC is a chassis whose power a test reads; it refuses what refuse names.
type fakeBMC struct {
	on       bool
	controls []chassis.ChassisControl
	connect  error
	bootdev  error
}

func (f *fakeBMC) Connect(context.Context) error { return f.connect }
func (f *fakeBMC) Close(context.Context) error   { return nil }
func (f *fakeBMC) ChassisControl(_ context.Context, c chassis.ChassisControl) (*chassis.ChassisControlResponse, error) {
	f.controls = append(f.controls, c)
	switch c {
	case chassis.ChassisControlPowerUp:
		f.on = true
	case chassis.ChassisControlPowerDown:
		f.on = false
	case chassis.ChassisControlPowerCycle:
		if !f.on {
			return nil, types.NewResponseError(0xd5, "not supported in present state")
		}
	}
	return &chassis.ChassisControlResponse{}, nil
}
func (f *fakeBMC) GetChassisStatus(context.Context) (*chassis.GetChassisStatusResponse, error) {
	return &chassis.GetChassisStatusResponse{PowerIsOn: f.on}, nil
}
func (f *fakeBMC) SetBootDevice(context.Context, types.BootDeviceSelector, types.BIOSBootType, bool) error {
	return f.bootdev
}

// Each action asks for what changes the chassis only: on for a running machine sends nothing,
// cycle of a stopped one powers it up (BMCs refuse a cycle of a machine that is off).
func TestDriverActionsAreIdempotent(t *testing.T) {
	ctx := context.Background()
	f := &fakeBMC{}
	d, err := open(ctx, "bmc:623", f)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		action api.PowerAction
		want   api.PowerStatus
		sent   int
	}{
		{api.PowerOn, api.PowerStateOn, 1},
		{api.PowerOn, api.PowerStateOn, 1},
		{api.PowerOff, api.PowerStateOff, 2},
		{api.PowerOff, api.PowerStateOff, 2},
		{api.PowerCycle, api.PowerStateOn, 3},
		{api.PowerCycle, api.PowerStateOn, 4},
		{api.PowerStatusAction, api.PowerStateOn, 4},
	} {
		out, err := power.Apply(ctx, d, c.action)
		if err != nil || out.State != c.want || len(f.controls) != c.sent {
			t.Errorf("%s: %+v, %v, %d controls sent (%v), want %s after %d", c.action, out, err, len(f.controls), f.controls, c.want, c.sent)
		}
	}
	if f.controls[2] != chassis.ChassisControlPowerUp || f.controls[3] != chassis.ChassisControlPowerCycle {
		t.Errorf("controls %v: cycle of an off machine must power it up, of a running one cycle it", f.controls)
	}
}

// A BMC refusing the next-boot device (ipmi_sim: "Invalid data field") still powers on, and
// the outcome says so; a refused session is ErrRefused naming the BMC, a silent one
// ErrUnreachable.
func TestDriverErrors(t *testing.T) {
	ctx := context.Background()
	f := &fakeBMC{bootdev: fmt.Errorf("SetSystemBootOptions failed, err: %w", types.NewResponseError(0xcc, "Invalid data field in request"))}
	d, err := open(ctx, "bmc:623", f)
	if err != nil {
		t.Fatal(err)
	}
	out, err := power.Apply(ctx, d, api.PowerOn)
	if err != nil || out.State != api.PowerStateOn || out.BootNote == "" || !f.on {
		t.Errorf("on with the boot device refused: %+v, %v", out, err)
	}
	_, err = open(ctx, "bmc:623", &fakeBMC{connect: errors.New("connect20 failed after try all cipher suite ids: RAKP2 authentication code mismatch")})
	if !errors.Is(err, power.ErrRefused) || !errorsContain(err, "BMC bmc:623", "wrong user or password") {
		t.Errorf("refused session: %v", err)
	}
	_, err = open(ctx, "bmc:623", &fakeBMC{connect: fmt.Errorf("cmd: Get Channel Authentication Capabilities failed, err: %w", os.ErrDeadlineExceeded)})
	if !errors.Is(err, power.ErrUnreachable) || !errorsContain(err, "BMC bmc:623") {
		t.Errorf("silent BMC: %v", err)
	}
}

func errorsContain(err error, parts ...string) bool {
	for _, p := range parts {
		if err == nil || !strings.Contains(err.Error(), p) {
			return false
		}
	}
	return true
}
