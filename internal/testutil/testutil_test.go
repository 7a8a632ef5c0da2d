package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure and, like testing.T, ends the goroutine
// that failed; run calls f in a goroutine of its own and waits for it.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatal(args ...any) {
	r.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *recorder) run(f func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}

func TestEventuallyWaitsForTheCondition(t *testing.T) {
	ready := time.Now().Add(50 * time.Millisecond)
	var r recorder
	r.run(func(t testing.TB) {
		Eventually(t, 10*time.Second, "the clock", func() bool { return time.Now().After(ready) })
	})
	if r.failed != "" || time.Now().Before(ready) {
		t.Fatalf("returned before the condition held, or failed: %q", r.failed)
	}
}

func TestEventuallyGivesUpWithTheMessage(t *testing.T) {
	var r recorder
	start := time.Now()
	r.run(func(t testing.TB) { Eventually(t, 30*time.Millisecond, "the moon", func() bool { return false }) })
	if r.failed != "gave up waiting for the moon" {
		t.Fatalf("failure = %q", r.failed)
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Fatal("gave up before the timeout")
	}
}

func TestEventuallyOKReportsTheLastComplaint(t *testing.T) {
	var r recorder
	n := 0
	r.run(func(t testing.TB) {
		EventuallyOK(t, 30*time.Millisecond, func() string { n++; return fmt.Sprintf("attempt %d", n) })
	})
	if r.failed != fmt.Sprintf("attempt %d", n) || n < 2 {
		t.Fatalf("failure = %q after %d attempts", r.failed, n)
	}
}

func TestEventuallyValueReturnsWhatSatisfiedIt(t *testing.T) {
	var r recorder
	n, got := 0, 0
	r.run(func(t testing.TB) {
		got = EventuallyValue(t, 10*time.Second, func() (int, string) {
			n++
			if n < 3 {
				return n, fmt.Sprintf("only %d", n)
			}
			return n, ""
		})
	})
	if r.failed != "" || got != 3 {
		t.Fatalf("got %d, failure %q; want 3", got, r.failed)
	}
	r.run(func(t testing.TB) {
		EventuallyValue(t, 30*time.Millisecond, func() (int, string) { return 0, "never" })
	})
	if r.failed != "never" {
		t.Fatalf("failure = %q, want the last complaint", r.failed)
	}
}

func TestPollReturnsTheLastComplaint(t *testing.T) {
	n := 0
	if got := Poll(10*time.Second, func() string {
		if n++; n < 3 {
			return "not yet"
		}
		return ""
	}); got != "" || n != 3 {
		t.Fatalf("Poll = %q after %d calls, want \"\" after 3", got, n)
	}
	start := time.Now()
	if got := Poll(30*time.Millisecond, func() string { return "stuck" }); got != "stuck" || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("Poll = %q after %s, want the complaint after the timeout", got, time.Since(start))
	}
}

func TestSafeBufferConcurrentWrites(t *testing.T) {
	var b SafeBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprint(&b, "x")
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 800) {
		t.Fatalf("got %d bytes, want 800", len(got))
	}
}

func TestFreePorts(t *testing.T) {
	if FreePort(t) <= 0 || !strings.HasPrefix(FreeAddr(t), "127.0.0.1:") || !strings.HasPrefix(FreeUDPAddr(t), "127.0.0.1:") {
		t.Fatal("no port")
	}
}
