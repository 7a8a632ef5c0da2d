package store

import (
	"errors"
	"strings"
	"testing"
)

// keyParser is what keys and filters go through before they reach SQL.
type keyParser interface {
	keyWhere(key string) (*where, error)
	match(w *where, field, value string) error
}

var fuzzKinds = []keyParser{jobs, leases, machines, fabrics, vlans, subnets, pods, pools, profiles, racks, tasks, users}

// checkWhere asserts that a parsed condition passes every value as a parameter: it has as
// many parameters as arguments, and no argument text made it into the SQL.
func checkWhere(t *testing.T, w *where, input string) {
	sql := w.sql()
	if n := len(placeholder.FindAllString(sql, -1)); n < len(w.args) {
		t.Fatalf("%q: SQL %q has %d placeholders for %d arguments", input, sql, n, len(w.args))
	}
	for _, c := range []string{";", "--", "/*"} {
		if strings.Contains(sql, c) {
			t.Fatalf("%q: SQL %q contains %q", input, sql, c)
		}
	}
}

// FuzzParseKey feeds object keys (UUID, Name, Field:value) to every kind.
func FuzzParseKey(f *testing.F) {
	for _, seed := range []string{"", "3a000000-0000-4000-8000-000000000001", "Name:birdy", "HardwareAddrs:52:54:00:12:34:56",
		"Addr:10.0.0.5", "Runnable:true", "CurrentTask:3", "Secret:x", "Name:a\x00b", "Meta:x", "Name:'; DROP TABLE machines; --", "::", "Uuid:nope"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		for _, k := range fuzzKinds {
			w, err := k.keyWhere(key)
			if err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("key %q: error %v is not ErrInvalid", key, err)
				}
				continue
			}
			checkWhere(t, w, key)
		}
	})
}

// FuzzParseFilter feeds list filters (Field=value) to every kind.
func FuzzParseFilter(f *testing.F) {
	for _, seed := range [][2]string{{"Name", "birdy"}, {"HardwareAddrs", "52:54:00:12:34:56"}, {"Runnable", "yes"}, {"CurrentTask", "99999999999999999999"},
		{"Params", "x"}, {"Addr", "10.0.0.300"}, {"Subnet", "nope"}, {"Name'", "x"}, {"", ""}, {"Description", "'; --"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, field, value string) {
		for _, k := range fuzzKinds {
			w := &where{}
			if err := k.match(w, field, value); err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("filter %q=%q: error %v is not ErrInvalid", field, value, err)
				}
				continue
			}
			checkWhere(t, w, field+"="+value)
		}
	})
}
