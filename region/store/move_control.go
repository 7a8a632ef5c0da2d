package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// RecordMoveControl audits an operator's control of a bulk migration or rack transfer that
// moves from this region (event move-<action>, kind api.KindMoveControls, key the workflow ID).
func (s *Store) RecordMoveControl(ctx context.Context, by Principal, c api.MoveControl) error {
	var problems []string
	if !slices.Contains([]string{"pause", "resume", "set-window"}, c.Action) {
		problems = append(problems, fmt.Sprintf("Action %q is not pause, resume or set-window", c.Action))
	}
	if (c.Action == "set-window") != (c.Window > 0) {
		problems = append(problems, fmt.Sprintf("Window %d: a positive window goes with set-window only", c.Window))
	}
	for _, f := range []struct{ name, value string }{{"Migration", c.Migration}, {"By", c.By}} {
		if strings.TrimSpace(f.value) == "" {
			problems = append(problems, f.name+" is empty")
		}
	}
	if len(problems) > 0 {
		return invalidf("move control: %s", strings.Join(problems, "; "))
	}
	details := map[string]any{"By": c.By}
	if c.Window > 0 {
		details["Window"] = c.Window
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		return recordEvent(ctx, tx, by, "move-"+c.Action, api.KindMoveControls, c.Migration, details)
	})
}
