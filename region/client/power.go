package client

import (
	"context"
	"net/http"

	"github.com/ironflow/ironflow/region/api"
)

// Machine power (region/api/power.go).

// SetPower sets the power driver and BMC credentials of the machine at key.
func (c *Client) SetPower(ctx context.Context, key string, cfg api.PowerConfig) (api.Machine, error) {
	return callKey[api.Machine](ctx, c, http.MethodPut, cfg, api.KindMachines, key, "power")
}

// PowerCredential fetches the BMC credential of machine, a machine of rack, for that rack.
func (c *Client) PowerCredential(ctx context.Context, rack, machine string) (api.PowerCredential, error) {
	return callKey[api.PowerCredential](ctx, c, http.MethodGet, nil, api.KindRacks, rack, "machines", machine, "power-credential")
}

// ReportPower stores what rack saw of its machine's power, and audits an action.
func (c *Client) ReportPower(ctx context.Context, rack, machine string, rep api.PowerReport) (api.Machine, error) {
	return callKey[api.Machine](ctx, c, http.MethodPut, rep, api.KindRacks, rack, "machines", machine, "power")
}

// ReportCommissioning records a commissioning step's outcome on rack's machine.
func (c *Client) ReportCommissioning(ctx context.Context, rack, machine string, rep api.CommissionReport) (api.Machine, error) {
	return callKey[api.Machine](ctx, c, http.MethodPut, rep, api.KindRacks, rack, "machines", machine, "commissioning")
}
