package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestDevFlags checks the state dir reaches the stack as an absolute path (its processes run
// in other directories), from the flag or the environment, and a bad --free-ports variable
// is an error naming it.
func TestDevFlags(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		args      []string
		env       map[string]string
		stateDir  string
		freePorts bool
		err       string
	}{
		{name: "defaults", stateDir: filepath.Join(wd, ".ironflow-dev")},
		{name: "relative flag", args: []string{"--state-dir", "x/../state"}, stateDir: filepath.Join(wd, "state")},
		{name: "environment", env: map[string]string{"IRONFLOW_DEV_STATE_DIR": "/srv/dev", "IRONFLOW_DEV_FREE_PORTS": "1"}, stateDir: "/srv/dev", freePorts: true},
		{name: "flag over environment", args: []string{"--free-ports=false"}, env: map[string]string{"IRONFLOW_DEV_FREE_PORTS": "1"}, stateDir: filepath.Join(wd, ".ironflow-dev")},
		{name: "bad variable", env: map[string]string{"IRONFLOW_DEV_FREE_PORTS": "yes please"}, err: "IRONFLOW_DEV_FREE_PORTS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("IRONFLOW_DEV_STATE_DIR", "")
			os.Unsetenv("IRONFLOW_DEV_STATE_DIR")
			t.Setenv("IRONFLOW_DEV_FREE_PORTS", "")
			os.Unsetenv("IRONFLOW_DEV_FREE_PORTS")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var flags devFlags
			cmd := &cobra.Command{Use: "dev"}
			flags.declare(cmd.Flags())
			err := parseWithEnv(cmd, tc.args)
			stateDir := ""
			if err == nil {
				stateDir, err = flags.absStateDir()
			}
			freePorts := flags.FreePorts
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil || stateDir != tc.stateDir || freePorts != tc.freePorts {
				t.Errorf("devFlags = %q, %v, %v; want %q, %v", stateDir, freePorts, err, tc.stateDir, tc.freePorts)
			}
		})
	}
}
