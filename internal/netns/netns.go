// Package netns runs code in a named network namespace (ip netns), so the sockets it opens
// belong to that namespace while the rest of the process stays in its own.
package netns

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// Dir holds a file per named namespace (what `ip netns add` creates).
const Dir = "/var/run/netns"

// Run runs fn on an OS thread that joined namespace ns and returns fn's error; with ns ""
// it runs fn as it is, in the caller's namespace.
func Run(ns string, fn func() error) error {
	if ns == "" {
		return fn()
	}
	return <-Start(ns, fn)
}

// Start is Run without the wait, for an fn that serves until its caller stops it: the channel
// gets fn's error. The thread stays locked and exits with fn's goroutine, so nothing else ever
// runs in ns; goroutines fn starts run in the caller's namespace.
func Start(ns string, fn func() error) <-chan error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		f, err := os.Open(filepath.Join(Dir, ns))
		if err != nil {
			errc <- fmt.Errorf("network namespace %s: %w", ns, err)
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- fn()
	}()
	return errc
}
