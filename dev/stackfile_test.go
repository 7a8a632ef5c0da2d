package dev

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestStackFileIsTheRunningStacksOnly(t *testing.T) {
	dir := t.TempDir()
	lock, err := LockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	if _, err := ReadStackFile(dir); !errors.Is(err, ErrNoStackFile) {
		t.Fatalf("no stack file: %v", err)
	}
	s := &Stack{StateDir: dir, Regions: map[string]*Region{"region-a": {URL: "http://127.0.0.1:5240"}},
		Racks: map[string]*Rack{"rack-a": {Name: "rack-a", HTTPURL: "http://127.0.0.1:41205", DNS: "127.0.0.1:33247"}}}
	if err := s.WriteStackFile(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadStackFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Regions["region-a"] != "http://127.0.0.1:5240" || got.Racks["rack-a"].HTTPURL != "http://127.0.0.1:41205" || got.Racks["rack-a"].DNS != "127.0.0.1:33247" {
		t.Errorf("read back %+v", got)
	}
	// A stack that took the lock after the file was written has not recorded its own ports yet.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dir, StackFileName), old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStackFile(dir); !errors.Is(err, ErrNoStackFile) {
		t.Errorf("a previous stack's file: %v", err)
	}
}
