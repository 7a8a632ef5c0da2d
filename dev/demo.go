package dev

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/ironflow/ironflow/dev/seeddata"
)

// Demo replays the Digital Rebar migration story on a running stack by running the ironflow
// CLI exactly as a user would, printing each command and what it prints.
type Demo struct {
	Stack  *Stack
	Binary string // the ironflow CLI
	Out    io.Writer
	moves  []demoMove
}

type demoMove struct {
	what, how string
	took      time.Duration
}

// Run plays the story and prints a summary; the error names the step that failed.
func (d *Demo) Run(ctx context.Context) error {
	a, b := d.Stack.Regions["region-a"].URL, d.Stack.Regions["region-b"].URL
	steps := []struct {
		title string
		run   func(context.Context) error
	}{
		{"machines on both regions", func(ctx context.Context) error {
			if _, err := d.cli(ctx, "-E", a, "machines", "list", "Pool=default", "-o", "table"); err != nil {
				return err
			}
			_, err := d.cli(ctx, "-E", b, "machines", "list", "Pool=default", "-o", "table")
			return err
		}},
		{"birdy and its jobs on region-a", func(ctx context.Context) error {
			if _, err := d.cli(ctx, "-E", a, "machines", "show", "Name:birdy"); err != nil {
				return err
			}
			_, err := d.cli(ctx, "-E", a, "jobs", "list", "Machine="+seeddata.BirdyUUID, "-o", "table")
			return err
		}},
		{"migrate birdy with a ticket from region-b", func(ctx context.Context) error {
			ticket, err := d.cli(ctx, "-E", b, "machines", "migrateTicket")
			if err != nil {
				return err
			}
			start := time.Now()
			out, err := d.cli(ctx, "-E", a, "machines", "migrate", "Name:birdy", "to", strings.TrimSpace(ticket))
			if err != nil {
				return err
			}
			if want := "Machine Name:birdy migrated to " + b; !strings.Contains(out, want) {
				return fmt.Errorf("migrate printed %q, want %q", strings.TrimSpace(out), want)
			}
			d.moves = append(d.moves, demoMove{"machine birdy (2 jobs, 2 profiles)", "ticket flow", time.Since(start)})
			return nil
		}},
		{"both sides after the migration", func(ctx context.Context) error {
			for _, args := range [][]string{
				{"-E", a, "machines", "show", "Name:birdy"},
				{"-E", b, "machines", "show", "Name:birdy"},
				{"-E", a, "jobs", "list", "Machine=" + seeddata.BirdyUUID, "-o", "table"},
				{"-E", b, "jobs", "list", "Machine=" + seeddata.BirdyUUID, "-o", "table"},
				{"-E", b, "profiles", "show", "conflicting-profile"},
			} {
				if _, err := d.cli(ctx, args...); err != nil {
					return err
				}
			}
			return nil
		}},
		{"migrate drp1.rackn with --to, watching the phases", func(ctx context.Context) error {
			start := time.Now()
			if _, err := d.cli(ctx, "-E", a, "machines", "migrate", "Name:drp1.rackn", "--to", "region-b", "--wait"); err != nil {
				return err
			}
			d.moves = append(d.moves, demoMove{"machine drp1.rackn", "--to region-b", time.Since(start)})
			_, err := d.cli(ctx, "-E", b, "machines", "list", "Pool=default", "-o", "table")
			return err
		}},
		{"transfer rack-a and its machines to region-b", func(ctx context.Context) error {
			if err := d.Stack.WaitRackOnline(ctx, "rack-a"); err != nil {
				return err
			}
			start := time.Now()
			if _, err := d.cli(ctx, "-E", a, "racks", "transfer", "rack-a", "--to", "region-b", "--wait", "-o", "table"); err != nil {
				return err
			}
			d.moves = append(d.moves, demoMove{fmt.Sprintf("rack rack-a (%d machines, subnet, leases)", RackMachines), "racks transfer", time.Since(start)})
			if _, err := d.cli(ctx, "-E", b, "racks", "list", "-o", "table"); err != nil {
				return err
			}
			_, err := d.cli(ctx, "-E", a, "racks", "list", "-o", "table")
			return err
		}},
		{"the migrations, as Temporal recorded them", func(ctx context.Context) error {
			_, err := d.cli(ctx, "-E", a, "migrations", "list", "-o", "table")
			return err
		}},
	}
	for i, s := range steps {
		fmt.Fprintf(d.Out, "\n=== %d. %s\n", i+1, s.title)
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("demo step %d (%s): %w", i+1, s.title, err)
		}
	}
	d.summary()
	return nil
}

func (d *Demo) summary() {
	fmt.Fprintln(d.Out, "\n=== summary")
	w := tabwriter.NewWriter(d.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MOVED\tFROM\tTO\tHOW\tTOOK")
	for _, m := range d.moves {
		fmt.Fprintf(w, "%s\tregion-a\tregion-b\t%s\t%s\n", m.what, m.how, m.took.Round(time.Millisecond))
	}
	w.Flush()
}

// cli runs one ironflow command against the stack, echoing it and its output.
func (d *Demo) cli(ctx context.Context, args ...string) (string, error) {
	fmt.Fprintf(d.Out, "\n$ ironflow %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, d.Binary, args...)
	cmd.Env = append(os.Environ(),
		"IRONFLOW_TOKEN="+d.Stack.AdminToken,
		"IRONFLOW_TEMPORAL_ADDRESS="+d.Stack.Temporal.Address,
		"IRONFLOW_PAYLOAD_KEYS="+d.Stack.PayloadKeys,
	)
	// Stdout and stderr are copied by two goroutines: serialise their writes to d.Out.
	shown := &lockedWriter{w: d.Out}
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, shown)
	cmd.Stderr = shown
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("ironflow %s: %w", strings.Join(args, " "), err)
	}
	return out.String(), nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
