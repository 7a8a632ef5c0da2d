package rack

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/ironflow/ironflow/rack/power"
	"github.com/ironflow/ironflow/rack/power/ipmi"
	"github.com/ironflow/ironflow/region/api"
)

// DefaultPowerPollInterval is how often a rack checks the power state of its machines.
const DefaultPowerPollInterval = 5 * time.Minute

// powerDrivers are the drivers a rack opens by a machine's power type (a pod VM's virsh comes
// from the pods' dialer).
var powerDrivers = power.Drivers{
	api.PowerTypeIPMI:   ipmi.Open,
	api.PowerTypeManual: power.OpenManual,
}

// regionAPI implements rackacts.PowerRegion with the rack's token through the region link.

// Machine implements rackacts.PowerRegion.
func (r regionAPI) Machine(ctx context.Context, key string) (api.Machine, error) {
	return r.region().Machines().Get(asRack(ctx), key)
}

// RackMachines implements rackacts.PowerRegion.
func (r regionAPI) RackMachines(ctx context.Context) ([]api.Machine, error) {
	return r.region().Machines().List(asRack(ctx), url.Values{"Rack": {r.rack}, "limit": {strconv.Itoa(api.MaxPageSize)}})
}

// PowerCredential implements rackacts.PowerRegion.
func (r regionAPI) PowerCredential(ctx context.Context, machine string) (api.PowerCredential, error) {
	return r.region().PowerCredential(asRack(ctx), r.rack, machine)
}

// ReportCommissioning implements rackacts.PowerRegion.
func (r regionAPI) ReportCommissioning(ctx context.Context, machine string, rep api.CommissionReport) (api.Machine, error) {
	return r.region().ReportCommissioning(asRack(ctx), r.rack, machine, rep)
}

// ReportPower implements rackacts.PowerRegion.
func (r regionAPI) ReportPower(ctx context.Context, machine string, rep api.PowerReport) (api.Machine, error) {
	return r.region().ReportPower(asRack(ctx), r.rack, machine, rep)
}
