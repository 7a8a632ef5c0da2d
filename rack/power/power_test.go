package power_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ironflow/ironflow/rack/power"
	"github.com/ironflow/ironflow/region/api"
)

// An unknown power type has no driver; manual asks for an operator and knows no state.
func TestOpenAndManual(t *testing.T) {
	ctx := context.Background()
	drivers := power.Drivers{api.PowerTypeManual: power.OpenManual}
	if _, err := drivers.Open(ctx, api.PowerCredential{Machine: "m1", Type: "redfish"}); !errors.Is(err, power.ErrUnknownType) {
		t.Errorf("unknown type: %v", err)
	}
	d, err := drivers.Open(ctx, api.PowerCredential{Machine: "m1", Type: api.PowerTypeManual})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []api.PowerAction{api.PowerOn, api.PowerOff, api.PowerCycle} {
		if _, err := power.Apply(ctx, d, a); !errors.Is(err, power.ErrNeedsOperator) {
			t.Errorf("manual %s: %v, want ErrNeedsOperator", a, err)
		}
	}
	if out, err := power.Apply(ctx, d, api.PowerStatusAction); err != nil || out.State != api.PowerStateUnknown {
		t.Errorf("manual status: %+v, %v", out, err)
	}
}
