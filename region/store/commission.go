package store

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// SetCommissioning records a commissioning step's outcome on rack's machine at key
// (region/api/commission.go) and audits it. The start drops the machine's inventory and
// commissioning results, so that Ready, which needs an inventory, means the machine enlisted
// and reported since this commissioning started.
func (s *Store) SetCommissioning(ctx context.Context, by Principal, rack, key string, rep api.CommissionReport) (api.Machine, error) {
	if err := validCommissionReport(rep); err != nil {
		return api.Machine{}, err
	}
	var out api.Machine
	err := s.tx(ctx, func(tx pgx.Tx) error {
		r, err := machines.resolve(ctx, tx, key, true)
		if err != nil {
			return err
		}
		if r.obj.Rack != rack {
			return classed(ErrForbidden, "machine %s is not a machine of rack %s", r.obj.Name, rack)
		}
		m, err := clone(r.obj)
		if err != nil {
			return err
		}
		if held, err := holder(ctx, tx, m); err != nil || held != "" {
			if err == nil {
				err = conflictf("machine %s (%s) is held by migration %s: it cannot be commissioned now", m.Name, m.Uuid, held)
			}
			return err
		}
		switch rep.Status {
		case api.StatusCommissioning:
			if m.Enlisted != nil {
				m.Enlisted.Inventory, m.Enlisted.Commissioning = nil, nil
			}
		case api.StatusReady:
			if m.Enlisted == nil || m.Enlisted.Inventory == nil {
				return conflictf("machine %s has reported no inventory since its commissioning started: it cannot be %s", m.Name, api.StatusReady)
			}
		}
		m.Status, m.StatusReason = rep.Status, rep.Reason
		updated, err := updateMachine(ctx, tx, by, r, m)
		if err != nil {
			return err
		}
		out = *updated
		details := map[string]any{"Status": rep.Status, "Workflow": rep.Workflow}
		if rep.Reason != "" {
			details["Reason"] = rep.Reason
		}
		return recordEvent(ctx, tx, by, "commissioning", api.KindMachines, m.Uuid, details)
	})
	return out, err
}

func validCommissionReport(rep api.CommissionReport) error {
	switch rep.Status {
	case api.StatusCommissioning, api.StatusReady:
		if rep.Reason != "" {
			return invalidf("a commissioning report of status %s carries no Reason", rep.Status)
		}
	case api.StatusFailedCommissioning:
		if rep.Reason == "" {
			return invalidf("a commissioning report of status %s says why in Reason", rep.Status)
		}
	default:
		return invalidf("commissioning status %q is not one of %s, %s, %s", rep.Status, api.StatusCommissioning, api.StatusReady, api.StatusFailedCommissioning)
	}
	if len(rep.Reason) > api.MaxStatusReason || strings.ContainsFunc(rep.Reason, isControl) ||
		len(rep.Workflow) > api.MaxEnlistValue || strings.ContainsFunc(rep.Workflow, isControl) {
		return invalidf("a commissioning report's Reason is at most %d bytes and its Workflow %d, without control characters", api.MaxStatusReason, api.MaxEnlistValue)
	}
	return nil
}
