package main

import (
	"strings"
	"testing"
)

// TestEveryMachineCommandTakesTheSameKeys runs every command that takes a machine through the
// same key forms: a UUID and Field:value go to the region as they are, a bare name (dots and
// all) is Name:<name>, as for show.
func TestEveryMachineCommandTakesTheSameKeys(t *testing.T) {
	f := newFakeRegion(t)
	const name = "node-01.rack-a"
	forms := []struct{ key, sent string }{
		{name, "Name:" + name},
		{"Name:" + name, "Name:" + name},
		{f.machine.Uuid, f.machine.Uuid},
	}
	commands := []struct {
		args func(key string) []string
		// want is the request (or request body) that names the machine; "" when a command
		// needs no request for that key form (a UUID already is the machine's ID).
		want func(sent string) string
	}{
		{func(k string) []string { return []string{"machines", "show", k} }, get},
		{func(k string) []string { return []string{"machines", "update", k, `{"Description":"x"}`} }, prefixed("PATCH /api/v1/machines/")},
		{func(k string) []string { return []string{"machines", "delete", k} }, prefixed("DELETE /api/v1/machines/")},
		{func(k string) []string { return []string{"machines", "delete", k, "--decompose"} }, get},
		{func(k string) []string { return []string{"machines", "logs", k} }, func(s string) string { return get(s) + "/logs" }},
		{func(k string) []string { return []string{"machines", "inventory", k} }, get},
		{func(k string) []string { return []string{"machines", "power", "on", k} }, get},
		{func(k string) []string { return []string{"machines", "migrate", k, "--to", "region-b"} }, getUnlessUUID(f.machine.Uuid)},
		{func(k string) []string { return []string{"machines", "migrateGrant", k, "--to", "region-b"} }, func(s string) string { return `"Key":"` + s + `"` }},
		{func(k string) []string { return []string{"migrations", "cancel", k} }, getUnlessUUID(f.machine.Uuid)},
	}
	for _, c := range commands {
		for _, form := range forms {
			args := c.args(form.key)
			want := c.want(form.sent)
			if want == "" {
				continue
			}
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				before := len(f.seen())
				_, _, stderr := f.cli(t, "", args...)
				f.mu.Lock()
				sent := strings.Join(f.requests[before:], "\n") + "\n" + strings.Join(f.bodies[before:], "\n")
				f.mu.Unlock()
				if !strings.Contains(sent, want) {
					t.Errorf("sent %q, want %q in it (stderr %q)", sent, want, stderr)
				}
			})
		}
	}
}

func get(sent string) string { return "GET /api/v1/machines/" + sent }

func prefixed(prefix string) func(string) string {
	return func(sent string) string { return prefix + sent }
}

func getUnlessUUID(uuid string) func(string) string {
	return func(sent string) string {
		if sent == uuid {
			return ""
		}
		return get(sent)
	}
}
