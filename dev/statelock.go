package dev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/ironflow/ironflow/dev/postgres"
)

// lockFileName is the file in a state dir that a running stack holds an exclusive flock on
// for its whole life. The kernel drops the lock when the process ends, however it ends, so a
// crashed stack leaves no stale lock behind.
const lockFileName = "stack.lock"

// ErrStackRunning is returned when another process runs a stack on the same state dir.
var ErrStackRunning = errors.New("a dev stack is running on this state dir")

// StateLock is the held lock of a state dir.
type StateLock struct {
	dir  string
	file *os.File
}

// LockStateDir creates stateDir if needed and takes its lock, or fails with ErrStackRunning
// naming the PID that holds it, having changed nothing else.
func LockStateDir(stateDir string) (*StateLock, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("dev state dir: %w", err)
	}
	path := filepath.Join(stateDir, lockFileName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("dev state lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: PID %s holds %s (stop it with Ctrl-C or kill %[2]s; or run a second stack with --free-ports --state-dir DIR)",
				ErrStackRunning, strings.TrimSpace(string(holder)), path)
		}
		return nil, fmt.Errorf("dev state lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("dev state lock: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("dev state lock: %w", err)
	}
	return &StateLock{dir: stateDir, file: f}, nil
}

// Clear removes everything in the state dir but the lock, for a fresh start.
func (l *StateLock) Clear() error {
	if err := postgres.RemoveData(l.dir); err != nil {
		return err
	}
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("clear dev state dir: %w", err)
	}
	for _, e := range entries {
		if e.Name() == lockFileName {
			continue
		}
		if err := os.RemoveAll(filepath.Join(l.dir, e.Name())); err != nil {
			return fmt.Errorf("clear dev state dir: %w", err)
		}
	}
	return nil
}

// Unlock releases the lock; unlocking again does nothing.
func (l *StateLock) Unlock() {
	if l != nil && l.file != nil {
		l.file.Close()
		l.file = nil
	}
}

// Teardown removes a stopped stack's state dir and everything the stack keeps for it,
// refusing while a stack runs on it.
func Teardown(stateDir string) error {
	if _, err := os.Stat(stateDir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	lock, err := LockStateDir(stateDir)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if err := removeRackLinks(stateDir); err != nil {
		return err
	}
	return postgres.RemoveStateDir(stateDir)
}
