package main

import (
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
)

// operationColumns are the table columns of a rack's queued operations.
var operationColumns = []column[api.PendingOperation]{
	{"ID", func(op api.PendingOperation) string { return strconv.FormatInt(op.ID, 10) }},
	{"KIND", func(op api.PendingOperation) string { return op.Kind }},
	{"WRITE", func(op api.PendingOperation) string {
		if op.Kind != api.OperationWrite {
			return ""
		}
		return fmt.Sprintf("%v %v by %v", op.Payload["Method"], op.Payload["Path"], op.QueuedBy)
	}},
	{"CREATED", func(op api.PendingOperation) string { return cellTime(op.Created) }},
	{"RELEASED", func(op api.PendingOperation) string { return cellBool(op.Released) }},
	{"OUTCOME", func(op api.PendingOperation) string { return op.Outcome }},
}

// newRacksOperationsCommand lists what is queued for a paused rack, or shows one operation:
// the one a queued write's 202 named, with its outcome once replayed.
func newRacksOperationsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "operations RACK [ID]",
		Short: "List the operations queued for a paused rack, or show one (a queued write and its outcome)",
		Long: "Without ID, list the operations queued for RACK and its machines and not yet released. With ID, show\n" +
			"that operation, released or not: a write queued while the rack was paused for a transfer says\n" +
			"how its replay ended (Outcome). RACK is a UUID or a rack name; after a hand-over the rack is\n" +
			"gone from the source region: give its UUID there.",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, rc := cmd.Context(), regionClient(cmd)
			rack := args[0]
			if _, err := uuid.Parse(rack); err != nil {
				r, err := rc.Racks().Get(ctx, racks.key(rack))
				if err != nil {
					return fmt.Errorf("rack %s: %w", rack, err)
				}
				rack = r.Uuid
			}
			if len(args) == 1 {
				ops, err := rc.RackOperations(ctx, rack)
				if err != nil {
					return err
				}
				return render(cmd, ops, ops, operationColumns)
			}
			id, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil {
				return fmt.Errorf("operation ID %q is not a number", args[1])
			}
			op, err := rc.RackOperation(ctx, rack, id)
			if err != nil {
				return err
			}
			return render(cmd, op, []api.PendingOperation{op}, operationColumns)
		},
	}
}
