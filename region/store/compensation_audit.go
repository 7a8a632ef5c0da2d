package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// RecordCompensationDecision audits an operator's answer to the stuck compensation of a
// migration of machineUUID (event compensation-<action>). The machine need not exist here any
// more: the decision is about what a migration could not undo.
func (s *Store) RecordCompensationDecision(ctx context.Context, by Principal, machineUUID string, d api.CompensationDecision) error {
	if err := canonUUID("machine", "Uuid", &machineUUID, false); err != nil {
		return err
	}
	var problems []string
	if d.Action != "retry" && d.Action != "abandon" {
		problems = append(problems, fmt.Sprintf("Action %q is neither retry nor abandon", d.Action))
	}
	for _, f := range []struct{ name, value string }{{"Migration", d.Migration}, {"Reason", d.Reason}, {"By", d.By}} {
		if strings.TrimSpace(f.value) == "" {
			problems = append(problems, f.name+" is empty")
		}
	}
	if len(problems) > 0 {
		return invalidf("compensation decision: %s", strings.Join(problems, "; "))
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		return recordEvent(ctx, tx, by, "compensation-"+d.Action, api.KindMachines, machineUUID, map[string]any{
			"Migration": d.Migration, "Reason": d.Reason, "By": d.By, "Compensation": d.Compensation})
	})
}
