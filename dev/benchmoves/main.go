// Command benchmoves (`make bench-moves`) times moves at scale on the dev stack: for each N and
// each Temporal engine it starts a fresh stack, as `ironflow dev` runs it (file-backed Temporal
// dev server) or on the Temporal server on PostgreSQL with 4 history shards (dev/temporalpg),
// each with its metrics port on, puts N machines behind rack-a and N in a pool of their own on region-a,
// each with a job and its log, transfers rack-a to region-b and bulk-migrates the pool there,
// then verifies every machine and prints, per move: wall time, ms per machine, Temporal state
// transitions and persistence writes per machine, and the CPU time of each process.
//
// Environment: IRONFLOW_BENCH_MOVES_N (comma-separated sizes, default "24,200,1000"),
// IRONFLOW_BENCH_MOVES_ENGINES ("dev,postgres"), IRONFLOW_BENCH_MOVES_MOVES ("transfer,bulk"),
// IRONFLOW_BENCH_MOVES_WINDOW (the window of both moves; 0: the workflows' defaults),
// IRONFLOW_TEMPORAL_CLI (the dev server), IRONFLOW_TEMPORAL_SERVER (temporal-server, with
// temporal-sql-tool beside it).
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/dev/postgres"
	"github.com/ironflow/ironflow/dev/temporalpg"
	"github.com/ironflow/ironflow/dev/temporalserver"
	"github.com/ironflow/ironflow/region/api"
	regionclient "github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/workflows"
)

const (
	envSizes   = "IRONFLOW_BENCH_MOVES_N"
	envEngines = "IRONFLOW_BENCH_MOVES_ENGINES"
	envMoves   = "IRONFLOW_BENCH_MOVES_MOVES"
	envWindow  = "IRONFLOW_BENCH_MOVES_WINDOW"

	benchPool = "bench"
	// grantTTL outlasts the slowest move measured: a default grant (15 min) expires during a
	// per-machine transfer of 1,000 machines on a loaded host, failing the children left.
	grantTTL = 2 * time.Hour
	source   = "region-a"
	target   = "region-b"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench-moves:", err)
		os.Exit(1)
	}
}

type config struct {
	sizes   []int
	engines []string
	moves   []string
	window  int
}

// engines start the stack's Temporal server: nil is the dev server.
var engines = map[string]func(context.Context, *postgres.Cluster, string) (*temporalserver.Server, error){
	"dev": nil,
	"postgres": func(ctx context.Context, pg *postgres.Cluster, stateDir string) (*temporalserver.Server, error) {
		return temporalpg.Start(ctx, temporalpg.Options{Postgres: pg, Dir: stateDir, MetricsPort: -1})
	},
}

func configFromEnv() (config, error) {
	c := config{engines: []string{"dev", "postgres"}, moves: []string{"transfer", "bulk"}}
	sizes := os.Getenv(envSizes)
	if sizes == "" {
		sizes = "24,200,1000"
	}
	for _, f := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < dev.RackMachines {
			return c, fmt.Errorf("%s=%q: each size must be a number of at least %d (the seed's machines behind rack-a)", envSizes, sizes, dev.RackMachines)
		}
		c.sizes = append(c.sizes, n)
	}
	if e := os.Getenv(envEngines); e != "" {
		c.engines = strings.Split(e, ",")
		for _, engine := range c.engines {
			if _, ok := engines[engine]; !ok {
				return c, fmt.Errorf("%s=%q: the engines are dev and postgres", envEngines, e)
			}
		}
	}
	if m := os.Getenv(envMoves); m != "" {
		c.moves = strings.Split(m, ",")
		for _, move := range c.moves {
			if move != "transfer" && move != "bulk" {
				return c, fmt.Errorf("%s=%q: the moves are transfer and bulk", envMoves, m)
			}
		}
	}
	if w := os.Getenv(envWindow); w != "" {
		n, err := strconv.Atoi(w)
		if err != nil || n < 0 || n > workflows.MaxBulkWindow {
			return c, fmt.Errorf("%s=%q: a window between 0 (the default) and %d", envWindow, w, workflows.MaxBulkWindow)
		}
		c.window = n
	}
	return c, nil
}

func run(ctx context.Context, out io.Writer) error {
	cfg, err := configFromEnv()
	if err != nil {
		return err
	}
	var results []result
	for _, n := range cfg.sizes {
		for _, engine := range cfg.engines {
			rs, err := benchSize(ctx, cfg, n, engine, out)
			results = append(results, rs...)
			if err != nil {
				printResults(out, results)
				return fmt.Errorf("N=%d, %s: %w", n, engine, err)
			}
		}
	}
	printResults(out, results)
	return nil
}

// result is one measured move.
type result struct {
	engine    string
	move      string
	n         int
	window    int
	wall      time.Duration
	verified  int
	counters  counters // deltas over the move
	cpu       cpuTimes // deltas over the move
	loadStart string
	loadEnd   string
	// events is the length of the move's history (its last run's, for a bulk run that
	// continued as new): what a replay of it reads.
	events int64
}

func benchSize(ctx context.Context, cfg config, n int, engine string, out io.Writer) ([]result, error) {
	fmt.Fprintf(out, "N=%d, %s: starting the dev stack...\n", n, engine)
	s, err := dev.StartStack(ctx, dev.StackOptions{
		Seed: true, RunWorker: true, TemporalUIPort: -1, TemporalMetricsPort: -1, StartTemporal: engines[engine],
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	rack := s.Racks["rack-a"]
	if err := s.WaitRackOnline(ctx, rack.Name); err != nil {
		return nil, err
	}
	b := &bench{s: s, engine: engine, src: regionClient(s, source), dst: regionClient(s, target), window: cfg.window}
	var results []result
	for _, move := range cfg.moves {
		fmt.Fprintf(out, "N=%d, %s: seeding %s...\n", n, engine, move)
		var machines []string
		var start func(context.Context) (client.WorkflowRun, error)
		switch move {
		case "transfer":
			machines, err = b.seed(ctx, n, dev.RackMachines, func(m *api.Machine) { m.Rack = rack.Uuid }, "rack", 1)
			start = func(ctx context.Context) (client.WorkflowRun, error) { return b.startTransfer(ctx, rack.Uuid) }
		case "bulk":
			machines, err = b.seed(ctx, n, 0, func(m *api.Machine) { m.Pool = benchPool }, "bulk", 2)
			start = b.startBulk
		}
		if err != nil {
			return results, err
		}
		fmt.Fprintf(out, "N=%d, %s: running %s...\n", n, engine, move)
		r, err := b.measure(ctx, move, n, start)
		if err != nil {
			return results, err
		}
		if r.verified, err = b.verify(ctx, machines); err != nil {
			return append(results, r), fmt.Errorf("%s: %w", move, err)
		}
		fmt.Fprintf(out, "N=%d, %s: %s took %s, %d machines verified\n", n, engine, move, r.wall.Round(time.Millisecond), r.verified)
		results = append(results, r)
	}
	return results, nil
}

type bench struct {
	s        *dev.Stack
	engine   string
	src, dst *regionclient.Client
	window   int
	jobs     map[string][]string // machine UUID -> its job UUIDs before the move
}

func regionClient(s *dev.Stack, name string) *regionclient.Client {
	return regionclient.New(s.Regions[name].URL, s.AdminToken)
}

// seed adds machines to region-a until n of those place chooses exist (have of them exist
// already: the seed's), each with a finished job and its log, and returns all n UUIDs. Their
// names start with prefix and their MACs with 52:54:01:<macByte>.
func (b *bench) seed(ctx context.Context, n, have int, place func(*api.Machine), prefix string, macByte int) ([]string, error) {
	if b.jobs == nil {
		b.jobs = map[string][]string{}
	}
	probe := api.Machine{}
	place(&probe)
	filter := url.Values{}
	if probe.Rack != "" {
		filter.Set("Rack", probe.Rack)
	} else {
		filter.Set("Pool", probe.Pool)
		if _, err := b.src.Pools().Create(ctx, api.Pool{Name: probe.Pool, Description: "bench-moves machines"}); err != nil {
			return nil, fmt.Errorf("create pool %s: %w", probe.Pool, err)
		}
	}
	for i := have; i < n; i++ {
		m := api.Machine{
			Name: fmt.Sprintf("bench-%s-%04d", prefix, i), Arch: "amd64", BootEnv: "local", Stage: "none",
			Available: true, Runnable: true, Validated: true,
			HardwareAddrs: []string{fmt.Sprintf("52:54:01:%02x:%02x:%02x", macByte, i>>8, i&0xff)},
			Meta:          map[string]string{"machine-role": "machine"},
		}
		place(&m)
		created, err := b.src.Machines().Create(ctx, m)
		if err != nil {
			return nil, fmt.Errorf("create machine %s: %w", m.Name, err)
		}
		job, err := b.src.Jobs().Create(ctx, api.Job{Machine: created.Uuid, State: api.JobFinished, ExitState: "complete", Stage: "bench", Task: "bench-task", Meta: map[string]string{}})
		if err != nil {
			return nil, fmt.Errorf("create a job of machine %s: %w", m.Name, err)
		}
		if err := b.src.AppendJobLog(ctx, job.Uuid, "bench log of "+m.Name+"\n"); err != nil {
			return nil, fmt.Errorf("log of job %s: %w", job.Uuid, err)
		}
	}
	machines, err := b.src.Machines().List(ctx, filter)
	if err != nil {
		return nil, err
	}
	if len(machines) != n {
		return nil, fmt.Errorf("%d machines match %v on %s, want %d", len(machines), filter, source, n)
	}
	jobs, err := b.src.Jobs().List(ctx, nil)
	if err != nil {
		return nil, err
	}
	uuids := make([]string, 0, n)
	for _, m := range machines {
		uuids = append(uuids, m.Uuid)
		b.jobs[m.Uuid] = []string{}
	}
	for _, j := range jobs {
		if _, ok := b.jobs[j.Machine]; ok {
			b.jobs[j.Machine] = append(b.jobs[j.Machine], j.Uuid)
		}
	}
	return uuids, nil
}

func (b *bench) startTransfer(ctx context.Context, rack string) (client.WorkflowRun, error) {
	g, err := b.src.IssueGrant(ctx, api.GrantRequest{Kind: api.GrantRack, Key: rack, TargetRegion: target, TTL: grantTTL})
	if err != nil {
		return nil, fmt.Errorf("rack grant: %w", err)
	}
	in := workflows.TransferRackInput{SourceRegion: source, TargetRegion: target, Rack: rack, Window: b.window, Grant: g.Token}
	return b.s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.TransferRackID(rack), TaskQueue: workflows.TaskQueue}, workflows.TransferRack, in)
}

func (b *bench) startBulk(ctx context.Context) (client.WorkflowRun, error) {
	g, err := b.src.IssueGrant(ctx, api.GrantRequest{Kind: api.GrantBulk, Selector: api.GrantSelector{Pool: benchPool}, TargetRegion: target, TTL: grantTTL})
	if err != nil {
		return nil, fmt.Errorf("bulk grant: %w", err)
	}
	in := workflows.BulkMigrateInput{SourceRegion: source, TargetRegion: target, Selector: activities.Selector{Pool: benchPool}, Window: b.window, Grant: g.Token}
	return b.s.Client.ExecuteWorkflow(ctx, workflows.BulkMigrateStartOptions("bench"), workflows.BulkMigrate, in)
}

// measure runs one move to its end and returns its wall time and what the processes spent.
func (b *bench) measure(ctx context.Context, move string, n int, start func(context.Context) (client.WorkflowRun, error)) (result, error) {
	r := result{engine: b.engine, move: move, n: n, window: b.window, loadStart: loadAverage()}
	before, err := b.sample(ctx)
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	run, err := start(ctx)
	if err != nil {
		return r, fmt.Errorf("start %s: %w", move, err)
	}
	var failed []string
	failedCount := 0
	switch move {
	case "transfer":
		var res workflows.TransferRackResult
		err = run.Get(ctx, &res)
	case "bulk":
		var res workflows.BulkMigrateResult
		if err = run.Get(ctx, &res); err == nil {
			_, failedCount, _ = res.Counts()
			for _, f := range res.Failed {
				failed = append(failed, f.Machine+": "+f.Error)
			}
		}
	}
	r.wall = time.Since(t0)
	r.loadEnd = loadAverage()
	if err != nil {
		return r, fmt.Errorf("%s failed: %w", move, err)
	}
	if failedCount > 0 {
		return r, fmt.Errorf("%s: %d machines failed: %s", move, failedCount, strings.Join(failed[:min(len(failed), 5)], "; "))
	}
	after, err := b.sample(ctx)
	if err != nil {
		return r, err
	}
	desc, err := b.s.Client.DescribeWorkflowExecution(ctx, run.GetID(), "")
	if err != nil {
		return r, fmt.Errorf("describe %s: %w", run.GetID(), err)
	}
	r.events = desc.GetWorkflowExecutionInfo().GetHistoryLength()
	r.counters, r.cpu = after.counters.minus(before.counters), after.cpu.minus(before.cpu)
	return r, nil
}

// verify checks every machine: active exactly once, on the target; a locked stub redirecting
// there on the source; every job it had before on the target.
func (b *bench) verify(ctx context.Context, machines []string) (int, error) {
	onSrc, err := byUuid(ctx, b.src)
	if err != nil {
		return 0, err
	}
	onDst, err := byUuid(ctx, b.dst)
	if err != nil {
		return 0, err
	}
	dstJobs, err := b.dst.Jobs().List(ctx, nil)
	if err != nil {
		return 0, err
	}
	jobOf := map[string]string{}
	for _, j := range dstJobs {
		jobOf[j.Uuid] = j.Machine
	}
	targetURL := b.s.Regions[target].URL
	var problems []string
	for _, id := range machines {
		d, ok := onDst[id]
		switch {
		case !ok:
			problems = append(problems, id+": missing on "+target)
		case !d.Runnable || d.Locked || d.Meta[api.MetaRedirectEndpoint] != "" || d.Meta[api.MetaMigrating] != "":
			problems = append(problems, fmt.Sprintf("%s: not live on %s (Runnable=%v Locked=%v Meta=%v)", id, target, d.Runnable, d.Locked, d.Meta))
		}
		s, ok := onSrc[id]
		switch {
		case !ok:
			problems = append(problems, id+": no stub on "+source)
		case s.Runnable || !s.Locked || s.Meta[api.MetaRedirectEndpoint] != targetURL:
			problems = append(problems, fmt.Sprintf("%s: not a stub on %s redirecting to %s (Runnable=%v Locked=%v Meta=%v)", id, source, targetURL, s.Runnable, s.Locked, s.Meta))
		}
		for _, j := range b.jobs[id] {
			if jobOf[j] != id {
				problems = append(problems, fmt.Sprintf("%s: job %s missing on %s", id, j, target))
			}
		}
	}
	if len(problems) > 0 {
		return len(machines) - len(problems), fmt.Errorf("%d problems: %s", len(problems), strings.Join(problems[:min(len(problems), 10)], "; "))
	}
	return len(machines), nil
}

func byUuid(ctx context.Context, c *regionclient.Client) (map[string]api.Machine, error) {
	list, err := c.Machines().List(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := make(map[string]api.Machine, len(list))
	for _, m := range list {
		out[m.Uuid] = m
	}
	return out, nil
}

// sample is what the counters and processes say at one instant.
type sample struct {
	counters counters
	cpu      cpuTimes
}

func (b *bench) sample(ctx context.Context) (sample, error) {
	c, err := settledCounters(ctx, b.s.Temporal.MetricsURL)
	if err != nil {
		return sample{}, err
	}
	pgPID, err := postmasterPID(b.s.Postgres.DataDir)
	if err != nil {
		return sample{}, err
	}
	cpu := cpuTimes{
		temporal: processCPU(b.s.Temporal.PID(), false),
		ironflow: processCPU(os.Getpid(), false),
		postgres: processCPU(pgPID, true),
	}
	return sample{counters: c, cpu: cpu}, nil
}

// counters are the Temporal server's cumulative metrics the bench reports.
type counters struct {
	// stateTransitions counts state_transition_count observations: the server records one per
	// mutable-state write (its value, the workflow's cumulative count, is not summed).
	stateTransitions float64
	persistence      float64 // persistence_requests: every request to the store
	updates          float64 // persistence_requests of UpdateWorkflowExecution
	visibility       float64 // visibility_persistence_requests
}

func (c counters) minus(o counters) counters {
	return counters{c.stateTransitions - o.stateTransitions, c.persistence - o.persistence, c.updates - o.updates, c.visibility - o.visibility}
}

// metricsInterval is how often the Temporal server publishes its metrics to the Prometheus
// endpoint (its tally scope's reporting interval), both engines.
const metricsInterval = time.Second

// settledCounters scrapes the server's metrics until its workflow counters stop moving: read
// right after a move, they would miss the move's last second (a bulk run of 24 machines on the
// PostgreSQL engine showed none of its state transitions).
func settledCounters(ctx context.Context, metricsURL string) (counters, error) {
	prev, err := scrape(ctx, metricsURL)
	if err != nil {
		return prev, err
	}
	for {
		select {
		case <-ctx.Done():
			return prev, ctx.Err()
		case <-time.After(metricsInterval + metricsInterval/2):
		}
		c, err := scrape(ctx, metricsURL)
		if err != nil || c.stateTransitions == prev.stateTransitions && c.updates == prev.updates {
			return c, err
		}
		prev = c
	}
}

// scrape reads the Prometheus text format of the server's metrics endpoint.
func scrape(ctx context.Context, metricsURL string) (counters, error) {
	var c counters
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return c, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, fmt.Errorf("temporal metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		name, labels, _ := strings.Cut(line[:sp], "{")
		switch name {
		case "state_transition_count_count":
			c.stateTransitions += v
		case "persistence_requests":
			c.persistence += v
			if strings.Contains(labels, `operation="UpdateWorkflowExecution"`) {
				c.updates += v
			}
		case "visibility_persistence_requests":
			c.visibility += v
		}
	}
	return c, sc.Err()
}

// cpuTimes are CPU seconds (user+system) of the stack's processes: this one (regions, racks,
// worker, bench client), the Temporal server, and PostgreSQL with its backends (the regions'
// databases and, on the postgres engine, Temporal's).
type cpuTimes struct {
	ironflow, temporal, postgres float64
}

func (c cpuTimes) minus(o cpuTimes) cpuTimes {
	return cpuTimes{c.ironflow - o.ironflow, c.temporal - o.temporal, c.postgres - o.postgres}
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times (100 on Linux).
const clockTicks = 100

// processCPU returns the CPU seconds of pid (and, with children, of its live children and
// those it has reaped), 0 when it cannot be read.
func processCPU(pid int, children bool) float64 {
	f := statFields(pid)
	if len(f) < 17 {
		return 0
	}
	total := tick(f[13]) + tick(f[14]) // utime, stime
	if !children {
		return total
	}
	total += tick(f[15]) + tick(f[16]) // cutime, cstime
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cf := statFields(child); len(cf) >= 17 && cf[3] == strconv.Itoa(pid) {
			total += tick(cf[13]) + tick(cf[14])
		}
	}
	return total
}

// statFields splits /proc/<pid>/stat after the command name (which may hold spaces), so
// field i is the i+1-th of proc(5) with fields 0 and 1 (pid, comm) kept as placeholders.
func statFields(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return nil
	}
	return append([]string{"pid", "comm"}, strings.Fields(s[end+1:])...)
}

func tick(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v / clockTicks
}

func postmasterPID(dataDir string) (int, error) {
	data, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("postgres pid: %w", err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, errors.New("postgres pid: postmaster.pid does not start with a pid")
	}
	return pid, nil
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:min(3, len(f))], " ")
}

func printResults(out io.Writer, results []result) {
	if len(results) == 0 {
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "engine\tmove\tN\twindow (0: default)\twall s\tms/machine\tverified\ttransitions/machine\twrites/machine\tupdates/machine\tvisibility/machine\tCPU ms/machine ironflow\ttemporal\tpostgres\thistory events\tload start\tload end\t")
	for _, r := range results {
		n := float64(r.n)
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%.1f\t%.1f\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%d\t%s\t%s\t\n",
			r.engine, r.move, r.n, r.window, r.wall.Seconds(), float64(r.wall.Milliseconds())/n, r.verified,
			r.counters.stateTransitions/n, r.counters.persistence/n, r.counters.updates/n, r.counters.visibility/n,
			1000*r.cpu.ironflow/n, 1000*r.cpu.temporal/n, 1000*r.cpu.postgres/n, r.events, r.loadStart, r.loadEnd)
	}
	w.Flush()
}
