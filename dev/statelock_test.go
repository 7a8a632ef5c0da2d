package dev

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A state dir has one holder: a second lock fails naming the holder's PID and changes nothing;
// Clear keeps only the lock; after Unlock the dir can be locked again and Teardown removes it.
func TestStateLockHasOneHolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	lock, err := LockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "admin-token"), []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LockStateDir(dir)
	if !errors.Is(err, ErrStackRunning) || !strings.Contains(err.Error(), "PID "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock: %v, want ErrStackRunning naming PID %d", err, os.Getpid())
	}
	if err := Teardown(dir); !errors.Is(err, ErrStackRunning) {
		t.Errorf("teardown of a held state dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "admin-token")); err != nil {
		t.Errorf("a refused lock or teardown changed the state dir: %v", err)
	}
	if err := lock.Clear(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != lockFileName {
		t.Errorf("after Clear: %v, want only the lock", entries)
	}
	lock.Unlock()
	lock.Unlock() // a second Unlock does nothing
	if err := Teardown(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Teardown: %v", err)
	}
}
