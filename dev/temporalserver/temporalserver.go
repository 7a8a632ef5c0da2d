// Package temporalserver runs the Temporal dev server (`temporal server start-dev` from the
// pinned Temporal CLI the Makefile builds into ./bin) for the dev stack and tests. It imports
// nothing from Ironflow, so every package's tests can use it.
package temporalserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/ironflow/ironflow/internal/netutil"
)

// EnvCLI names the Temporal CLI binary; the Makefile builds it into ./bin.
const EnvCLI = "IRONFLOW_TEMPORAL_CLI"

// Server is a Temporal server run by this process: the dev server (`temporal server
// start-dev`, Start) or another one (StartProcess).
type Server struct {
	Address string // frontend gRPC host:port
	UIURL   string // web UI
	// MetricsURL serves the server's Prometheus metrics (Options.MetricsPort); empty without.
	MetricsURL string
	cmd        *exec.Cmd
	exited     chan struct{} // closed when the process has exited
	waitErr    error         // how it exited; read after exited is closed
	output     bytes.Buffer  // its output when no LogFile is given, for errors
}

// Options configure Start.
type Options struct {
	Binary   string // the temporal CLI; default: $IRONFLOW_TEMPORAL_CLI, then ./bin/temporal up the tree
	DBFile   string // SQLite file for persistent state; empty = in memory
	Port     int    // frontend port; 0 = free port
	UIPort   int    // web UI port; 0 = free port; -1 = no UI
	LogFile  string // server output; empty = discarded
	Headless bool
	// MetricsPort serves Prometheus metrics (state transitions, persistence requests) on
	// 127.0.0.1; 0 = none, -1 = a free port.
	MetricsPort int
	// UICodecEndpoint is the codec endpoint the web UI decodes payloads with; empty = none.
	UICodecEndpoint string
}

// FindCLI returns the Temporal CLI binary: $IRONFLOW_TEMPORAL_CLI, else bin/temporal in
// the current directory or one of its parents (tests run in package directories).
func FindCLI() (string, error) {
	return FindBinary(EnvCLI, "temporal", "run `make tools` (builds ./bin/temporal)")
}

// FindBinary returns the binary $env names, else bin/<name> in the current directory or one of
// its parents; build says how to make it when there is none.
func FindBinary(env, name, build string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s not found: %s or set %s", name, build, env)
		}
		dir = parent
	}
}

// Start starts the dev server and waits until it accepts connections.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = FindCLI(); err != nil {
			return nil, err
		}
	}
	return RetryOnFreePorts(opts.Port == 0, func() (*Server, error) { return start(ctx, bin, opts) })
}

// RetryOnFreePorts calls start up to three times while the server it starts exits early, when
// freePorts says its ports were chosen free by the caller: a free port can be taken between
// choosing it and the server binding it, and the next call chooses new ones.
func RetryOnFreePorts(freePorts bool, start func() (*Server, error)) (*Server, error) {
	attempts := 1
	if freePorts {
		attempts = 3
	}
	var err error
	for range attempts {
		var t *Server
		if t, err = start(); err == nil {
			return t, nil
		}
		if !errors.Is(err, ErrExitedEarly) {
			return nil, err
		}
	}
	return nil, err
}

// ErrExitedEarly is the error of a server process that exited before it was ready.
var ErrExitedEarly = errors.New("temporal server exited early")

func start(ctx context.Context, bin string, opts Options) (*Server, error) {
	port, err := portOrFree(opts.Port)
	if err != nil {
		return nil, err
	}
	args := []string{"server", "start-dev", "--ip", "127.0.0.1", "--port", strconv.Itoa(port), "--log-level", "warn"}
	t := &Server{Address: fmt.Sprintf("127.0.0.1:%d", port), exited: make(chan struct{})}
	if opts.UIPort < 0 || opts.Headless {
		args = append(args, "--headless")
	} else {
		uiPort, err := portOrFree(opts.UIPort)
		if err != nil {
			return nil, err
		}
		args = append(args, "--ui-port", strconv.Itoa(uiPort))
		t.UIURL = fmt.Sprintf("http://127.0.0.1:%d", uiPort)
		if opts.UICodecEndpoint != "" {
			args = append(args, "--ui-codec-endpoint", opts.UICodecEndpoint)
		}
	}
	if opts.DBFile != "" {
		args = append(args, "--db-filename", opts.DBFile)
	}
	if opts.MetricsPort != 0 {
		metricsPort, err := portOrFree(max(opts.MetricsPort, 0))
		if err != nil {
			return nil, err
		}
		args = append(args, "--metrics-port", strconv.Itoa(metricsPort))
		t.MetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	}
	if err := t.run(ctx, exec.Command(bin, args...), opts.LogFile); err != nil {
		return nil, err
	}
	return t, nil
}

// StartProcess runs cmd, a Temporal server whose frontend listens on address (host:port), and
// returns once a client can connect to it. Its output goes to logFile (empty: kept for the
// error of an early exit); metricsURL is where it serves its Prometheus metrics, if anywhere.
func StartProcess(ctx context.Context, cmd *exec.Cmd, address, metricsURL, logFile string) (*Server, error) {
	t := &Server{Address: address, MetricsURL: metricsURL, exited: make(chan struct{})}
	if err := t.run(ctx, cmd, logFile); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Server) run(ctx context.Context, cmd *exec.Cmd, logFile string) error {
	// Own process group, so Stop ends the server and nothing else.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = &t.output, &t.output
	if logFile != "" {
		f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("temporal log: %w", err)
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start temporal server %s: %w", cmd.Path, err)
	}
	t.cmd = cmd
	go func() {
		t.waitErr = cmd.Wait()
		close(t.exited)
	}()
	if err := t.waitReady(ctx, logFile); err != nil {
		t.Stop()
		return err
	}
	return nil
}

func (t *Server) waitReady(ctx context.Context, logFile string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		// The port opens before the frontend is healthy: a client dialled then fails with
		// "Frontend is not healthy yet". Ready is when a client's health check passes.
		if c, err := client.DialContext(ctx, client.Options{HostPort: t.Address, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))}); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-t.exited:
			out := t.output.String()
			if logFile != "" {
				data, _ := os.ReadFile(logFile)
				out = logFile + ": " + string(data)
			}
			return fmt.Errorf("%w (%v): %s", ErrExitedEarly, t.waitErr, lastBytes(out, 2000))
		case <-ctx.Done():
			return fmt.Errorf("temporal server not ready on %s: %w", t.Address, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// PID is the server's process ID (0 once stopped), for reading its CPU time.
func (t *Server) PID() int {
	if t.cmd == nil || t.cmd.Process == nil {
		return 0
	}
	return t.cmd.Process.Pid
}

// Stop ends the server (SIGTERM to its process group, SIGKILL after 10 s).
func (t *Server) Stop() {
	if t.cmd == nil || t.cmd.Process == nil {
		return
	}
	pgid := t.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-t.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-t.exited
	}
	t.cmd = nil
}

func portOrFree(port int) (int, error) {
	if port > 0 {
		return port, nil
	}
	return netutil.FreePort()
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
