// Package testutil holds the helpers Ironflow's tests share: waiting for a condition by
// polling it, free loopback ports, and a buffer that a writer and the test can use at once.
package testutil

import (
	"bytes"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironflow/ironflow/internal/netutil"
)

// Polling starts fast, for conditions met in milliseconds, and slows down to this, so a
// long wait does not load the processes being watched.
const (
	firstPoll = 5 * time.Millisecond
	maxPoll   = 100 * time.Millisecond
)

// Eventually polls cond until it holds; after timeout it fails the test with "gave up waiting
// for " + what. The timeout only bounds a broken test: it is not how long things take.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	EventuallyOK(t, timeout, func() string {
		if cond() {
			return ""
		}
		return "gave up waiting for " + what
	})
}

// EventuallyOK polls check, which returns what is still wrong or "" once all is well, until
// it returns ""; after timeout it fails the test with check's last complaint.
func EventuallyOK(t testing.TB, timeout time.Duration, check func() string) {
	t.Helper()
	if complaint := Poll(timeout, check); complaint != "" {
		t.Fatal(complaint)
	}
}

// EventuallyValue polls get, which returns what it observed and what is still wrong with it
// ("" once it is what the test waits for), and returns that value; after timeout it fails
// the test with the last complaint.
func EventuallyValue[T any](t testing.TB, timeout time.Duration, get func() (T, string)) T {
	t.Helper()
	var v T
	EventuallyOK(t, timeout, func() string {
		var complaint string
		v, complaint = get()
		return complaint
	})
	return v
}

// Poll calls check until it returns "" or timeout passes, and returns its last complaint, ""
// once all is well: for harness code that reports what it waited for instead of failing the
// test at once.
func Poll(timeout time.Duration, check func() string) string {
	deadline := time.Now().Add(timeout)
	for poll := firstPoll; ; poll = min(2*poll, maxPoll) {
		complaint := check()
		if complaint == "" || time.Now().After(deadline) {
			return complaint
		}
		time.Sleep(poll)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listened on a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := netutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// FreeAddr returns 127.0.0.1:port for a TCP port that nothing listened on a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}

// FreeUDPAddr returns 127.0.0.1:port for a UDP port that nothing listened on a moment ago.
func FreeUDPAddr(t testing.TB) string {
	t.Helper()
	port, err := netutil.FreeUDPPort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// FreeDNSAddr returns 127.0.0.1:port for a port free for UDP and TCP a moment ago.
func FreeDNSAddr(t testing.TB) string {
	t.Helper()
	port, err := netutil.FreeUDPTCPPort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// SafeBuffer is a bytes.Buffer that one goroutine (a logger, a command, a child process) can
// write while another reads it.
type SafeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SafeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SafeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// CPUTime is the user+system CPU time of this process so far: benchmarks report CPU time
// per operation, which depends much less than their rate on what else the machine runs.
func CPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
