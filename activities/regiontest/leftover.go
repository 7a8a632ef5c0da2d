package regiontest

import (
	"context"
	"fmt"

	"github.com/ironflow/ironflow/region/api"
)

// LeaveAfter puts machine as an attempt of migration left it when its worker died after step:
// "quiesce" (held on src), "copy" (and an inactive copy on dst) or "finalize" (src a stub
// redirecting to dst). Tests of resuming and settling start from it.
func LeaveAfter(src, dst *Region, migration, machine, step string) error {
	if step != "quiesce" && step != "copy" && step != "finalize" {
		return fmt.Errorf("no step %q: quiesce, copy or finalize", step)
	}
	ctx := context.Background()
	if _, err := src.Quiesce(ctx, machine, api.QuiesceRequest{Migration: migration}); err != nil || step == "quiesce" {
		return err
	}
	ticket, err := dst.MintTicket(ctx, api.TicketRequest{})
	if err != nil {
		return err
	}
	b, err := src.Export(ctx, machine)
	if err != nil {
		return err
	}
	if _, err := dst.Import(ctx, api.ImportRequest{Ticket: ticket.Token, Bundle: b, Migration: migration}); err != nil || step == "copy" {
		return err
	}
	_, err = src.FinalizeMigrationFor(ctx, machine, migration, api.FinalizeRequest{RedirectEndpoint: dst.info.URL})
	return err
}
