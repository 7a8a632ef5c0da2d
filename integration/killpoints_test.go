package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKillPoints runs real moves (a machine with a real agent and jobs; rack-a with its
// machines), holds each at a step boundary with a proxy in front of the regions, applies a
// fault there (SIGKILL of the worker process, cancel, termination of the parent run, an
// operator's delete on either region, an outage of either region), lets the move end and
// checks the invariants (ARCHITECTURE.md "Moves and their invariants") on both regions and on the agent: live on exactly one
// region, where the workflow's outcome says; the agent reaching it; no job or log lost; a
// later move accepted and completed. Moves start with a grant from the source region, like
// an operator's; a delete refused with 409 while the move holds the machine is the expected
// answer. A TransferRack terminated itself (terminate-parent at a rack point,
// terminate-transfer) is the operator's "stop without cleanup" and runs none of its own undos:
// the harness then runs the operator's recovery (`ironflow racks recover`), after which the
// rack must be held nowhere and online on exactly one region; its children's machines are
// held to every invariant without any help.
//
// By default it runs a seeded sample of IRONFLOW_KILLPOINT_SAMPLES (3) machine pairs and
// logs the seed; IRONFLOW_KILLPOINT_SEED reproduces a sample. IRONFLOW_KILLPOINTS=all runs
// the full matrix (machine and rack points), and IRONFLOW_KILLPOINTS=point/fault,... the
// pairs named ("*" for any point or fault). IRONFLOW_KILLPOINT_OUTAGE sets how long a
// stopped region stays down (20s in the matrix, 5s in the sample: still several failed
// attempts of the step), IRONFLOW_KILLPOINT_FINISH how long a move may take to end after
// the fault (3m in the matrix, 100s in the sample). A sample holds at most one worker kill.
func TestKillPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts PostgreSQL and the Temporal dev server")
	}
	runs, cfg := killPlan(t)
	e := newKillEnv(t, cfg)
	var reports []runReport
	for i, kr := range runs {
		t.Run(kr.String(), func(t *testing.T) {
			var rep runReport
			started := time.Now()
			if kr.point.rack || kr.fault == faultTerminateTransfer {
				rep = e.runRack(t, kr)
			} else {
				rep = e.runMachine(t, kr, i)
			}
			reports = append(reports, rep)
			t.Logf("%s: reached=%v fault: %s; outcome: %s; %d violations; %s", kr, rep.reached, rep.faultNote, rep.outcome, len(rep.violations), time.Since(started).Round(time.Second))
			if !rep.reached {
				t.Errorf("%s: the kill point was not reached (%s)", kr, rep.outcome)
			}
			for _, v := range rep.violations {
				t.Errorf("%s: invariant violated: %s", kr, v)
			}
		})
	}
	t.Log(summarize(reports))
}

// killPlan picks the runs and the knobs from the environment.
func killPlan(t *testing.T) ([]killRun, killConfig) {
	cfg := killConfig{outage: 5 * time.Second, finish: 3 * time.Minute, release: 10 * time.Second}
	var runs []killRun
	switch sel := os.Getenv("IRONFLOW_KILLPOINTS"); sel {
	case "all":
		cfg.outage = 20 * time.Second
		runs = matrix(append(append([]killPoint(nil), machinePoints...), rackPoints...), "*", "*")
	case "":
		seed := time.Now().UnixNano()
		if s := os.Getenv("IRONFLOW_KILLPOINT_SEED"); s != "" {
			var err error
			if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
				t.Fatalf("IRONFLOW_KILLPOINT_SEED=%q: %v", s, err)
			}
		}
		n := envInt(t, "IRONFLOW_KILLPOINT_SAMPLES", 3)
		all := matrix(machinePoints, "*", "*")
		rng := rand.New(rand.NewPCG(uint64(seed), 0))
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		runs = sample(all, n)
		cfg.finish = 100 * time.Second
		t.Logf("kill points: sample of %d, seed %d (IRONFLOW_KILLPOINT_SEED=%d reproduces it; IRONFLOW_KILLPOINTS=all runs the matrix)", len(runs), seed, seed)
	default:
		for _, pair := range strings.Split(sel, ",") {
			point, f, ok := strings.Cut(strings.TrimSpace(pair), "/")
			if !ok {
				t.Fatalf("IRONFLOW_KILLPOINTS: %q is not point/fault", pair)
			}
			got := matrix(append(append([]killPoint(nil), machinePoints...), rackPoints...), point, f)
			if len(got) == 0 {
				t.Fatalf("IRONFLOW_KILLPOINTS: no kill point %q with fault %q", point, f)
			}
			runs = append(runs, got...)
		}
	}
	if s := os.Getenv("IRONFLOW_KILLPOINT_OUTAGE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("IRONFLOW_KILLPOINT_OUTAGE=%q: want a positive duration", s)
		}
		cfg.outage = d
	}
	if s := os.Getenv("IRONFLOW_KILLPOINT_FINISH"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("IRONFLOW_KILLPOINT_FINISH=%q: want a positive duration", s)
		}
		cfg.finish = d
	}
	return runs, cfg
}

// sample takes the first n runs, at most one a worker kill: a killed worker's step
// is retried only after its start-to-close timeout (a minute, or ten for the copy), which
// would make the sample cost several minutes.
func sample(shuffled []killRun, n int) []killRun {
	var out []killRun
	kills := 0
	for _, r := range shuffled {
		if len(out) == n {
			break
		}
		if r.fault == faultKillWorker {
			if kills == 1 {
				continue
			}
			kills++
		}
		out = append(out, r)
	}
	return out
}

// matrix pairs the points named point with the faults named f ("*": all).
func matrix(points []killPoint, point, f string) []killRun {
	var out []killRun
	for _, p := range points {
		if point != "*" && point != p.name {
			continue
		}
		for _, fl := range allFaults {
			if (f == "*" || f == string(fl)) && p.applies(fl) {
				out = append(out, killRun{point: p, fault: fl})
			}
		}
	}
	return out
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// summarize counts runs, points reached and violations, and lists the runs that broke an
// invariant.
func summarize(reports []runReport) string {
	var b strings.Builder
	points := map[string]bool{}
	reached, violations, broken := 0, 0, 0
	for _, r := range reports {
		points[r.run.point.name] = true
		if r.reached {
			reached++
		}
		violations += len(r.violations)
		if len(r.violations) > 0 {
			broken++
		}
	}
	fmt.Fprintf(&b, "kill-point summary: %d runs over %d kill points, %d reached, %d runs with %d invariant violations\n", len(reports), len(points), reached, broken, violations)
	for _, r := range reports {
		status := "ok"
		if len(r.violations) > 0 {
			status = "VIOLATED: " + strings.Join(r.violations, " | ")
		}
		fmt.Fprintf(&b, "  %-32s %-60s %-40s %s\n", r.run, r.faultNote, r.outcome, status)
	}
	return b.String()
}
