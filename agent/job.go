package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// Exit states reported to the region.
const (
	ExitComplete = "complete"
	ExitFailed   = "failed"
	ExitTimeout  = "timeout"
)

// reportTimeout bounds the last log flush and the exit report when the agent is stopping.
const reportTimeout = 10 * time.Second

// runJob runs one job to its end: script, streamed log, exit report.
func (a *Agent) runJob(ctx context.Context, job api.AgentJob) {
	id := job.Job.Uuid
	timeout := job.Timeout
	if timeout <= 0 {
		timeout = a.Config().JobTimeout
	}
	a.log.Info("job started", "job", id, "task", job.Job.Task, "timeout", timeout)

	// Reports outlive an agent shutdown a little so the region learns how the job ended.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(reportTimeout, cancel) })
	defer stop()

	logs := a.newLogStream(rctx, id)
	exit := runScript(ctx, job.Script, timeout, logs)
	logs.Close()

	_, err := a.callFollowing(rctx, request{
		method: http.MethodPost, path: "/jobs/" + url.PathEscape(id) + "/exit",
		body: exit, timeout: 30 * time.Second,
	})
	if err != nil {
		a.log.Error("job exit not reported", "job", id, "error", err)
		return
	}
	a.log.Info("job ended", "job", id, "state", exit.ExitState, "code", exit.ExitCode)
}

// runScript runs script with /bin/sh -c in its own process group, writing its output to out;
// when timeout passes or ctx ends the whole group is killed.
func runScript(ctx context.Context, script string, timeout time.Duration, out *logStream) api.AgentJobExit {
	jctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(jctx, "/bin/sh", "-c", script)
	cmd.Stdout, cmd.Stderr = out, out // one writer: exec shares one pipe and keeps the order
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A background child that keeps the output pipe open must not hold the job forever.
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()

	var exitErr *exec.ExitError
	switch {
	case errors.Is(jctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		fmt.Fprintf(out, "\nironflow agent: job timed out after %s, killed\n", timeout)
		return api.AgentJobExit{ExitCode: exitCode(cmd), ExitState: ExitTimeout}
	case ctx.Err() != nil:
		fmt.Fprintf(out, "\nironflow agent: agent stopping, job killed\n")
		return api.AgentJobExit{ExitCode: exitCode(cmd), ExitState: ExitFailed}
	case err == nil:
		return api.AgentJobExit{ExitCode: 0, ExitState: ExitComplete}
	case errors.As(err, &exitErr):
		return api.AgentJobExit{ExitCode: exitCode(cmd), ExitState: ExitFailed}
	default: // the shell did not start, or its output could not be read
		fmt.Fprintf(out, "\nironflow agent: %v\n", err)
		return api.AgentJobExit{ExitCode: -1, ExitState: ExitFailed}
	}
}

// exitCode follows the shell convention: 128+signal for a killed process.
func exitCode(cmd *exec.Cmd) int {
	if cmd.ProcessState == nil {
		return -1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// logStream collects a job's output and sends it to the job log while the job runs: every
// LogInterval, or as soon as LogChunk bytes are waiting. Writes never block on the network,
// so a slow region does not stall the script.
type logStream struct {
	a    *Agent
	path string

	mu   sync.Mutex
	buf  []byte
	kick chan struct{}
	quit chan struct{}
	done chan struct{}
}

func (a *Agent) newLogStream(ctx context.Context, job string) *logStream {
	s := &logStream{
		a: a, path: "/jobs/" + url.PathEscape(job) + "/log",
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
	go s.run(ctx)
	return s
}

func (s *logStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.buf = append(s.buf, p...)
	full := len(s.buf) >= s.a.opts.LogChunk
	s.mu.Unlock()
	if full {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// Close sends what is left and waits for the sender.
func (s *logStream) Close() {
	close(s.quit)
	<-s.done
}

func (s *logStream) run(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(s.a.opts.LogInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-s.kick:
		case <-s.quit:
			s.flush(ctx)
			return
		}
		s.flush(ctx)
	}
}

func (s *logStream) flush(ctx context.Context) {
	s.mu.Lock()
	chunk := s.buf
	s.buf = nil
	s.mu.Unlock()
	if len(chunk) == 0 {
		return
	}
	_, err := s.a.callFollowing(ctx, request{
		method: http.MethodPut, path: s.path, timeout: 30 * time.Second,
		body: client.Raw{ContentType: "text/plain; charset=utf-8", Data: chunk},
	})
	if err != nil {
		s.a.log.Error("job log chunk lost", "path", s.path, "bytes", len(chunk), "error", err)
	}
}
