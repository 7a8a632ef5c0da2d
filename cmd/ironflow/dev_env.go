package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/dev"
)

// newDevEnvCommand prints the shell variables of the running dev stack, so that commands
// pasted from the docs reach it whatever ports it chose (the racks' are new at every start).
func newDevEnvCommand() *cobra.Command {
	var flags devFlags
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Print export lines for the running dev stack: token, payload keys, region, rack and Temporal addresses",
		Long: `Prints shell export lines for the stack running on --state-dir, for
eval "$(bin/ironflow dev env)": IRONFLOW_TOKEN and IRONFLOW_PAYLOAD_KEYS, each region's API
URL as A, B, ... (region-a is A), TEMPORAL_ADDRESS, the codec endpoint as CODEC_URL, and for
each rack its HTTP boot URL (RACK_A for rack-a), its DNS port (RACK_A_DNS_PORT) and its
syslog address (RACK_A_SYSLOG). Fails when no stack runs there.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stateDir, err := flags.absStateDir()
			if err != nil {
				return err
			}
			if err := requireRunningStack(stateDir); err != nil {
				return err
			}
			addrs, err := dev.ReadStackFile(stateDir)
			if err != nil {
				return err
			}
			token, err := os.ReadFile(filepath.Join(stateDir, "admin-token"))
			if err != nil {
				return fmt.Errorf("admin token: %w", err)
			}
			return printDevEnv(cmd.OutOrStdout(), addrs, strings.TrimSpace(string(token)))
		},
	}
	devScope.on(cmd.Flags()).string(&flags.StateDir, "state-dir", ".ironflow-dev", "the running stack's state dir")
	return cmd
}

// requireRunningStack fails unless a stack holds stateDir's lock: a stopped stack's file
// names ports nothing listens on any more.
func requireRunningStack(stateDir string) error {
	notRunning := fmt.Errorf("no dev stack runs on %s: start one with make dev (or bin/ironflow dev)", stateDir)
	if _, err := os.Stat(stateDir); errors.Is(err, os.ErrNotExist) {
		return notRunning
	}
	lock, err := dev.LockStateDir(stateDir)
	if err == nil {
		lock.Unlock()
		return notRunning
	}
	if errors.Is(err, dev.ErrStackRunning) {
		return nil
	}
	return err
}

func printDevEnv(w io.Writer, a dev.StackAddresses, token string) error {
	vars := [][2]string{{"IRONFLOW_TOKEN", token}, {"IRONFLOW_PAYLOAD_KEYS", a.PayloadKeys}}
	for _, name := range slices.Sorted(maps.Keys(a.Regions)) {
		vars = append(vars, [2]string{envSuffix(name, "region-"), a.Regions[name]})
	}
	vars = append(vars, [2]string{"TEMPORAL_ADDRESS", a.Temporal}, [2]string{"CODEC_URL", a.CodecURL})
	for _, name := range slices.Sorted(maps.Keys(a.Racks)) {
		rk, v := a.Racks[name], "RACK_"+envSuffix(name, "rack-")
		_, dnsPort, _ := strings.Cut(rk.DNS, ":")
		vars = append(vars, [2]string{v, rk.HTTPURL}, [2]string{v + "_DNS_PORT", dnsPort}, [2]string{v + "_SYSLOG", rk.Syslog})
	}
	for _, kv := range vars {
		if _, err := fmt.Fprintf(w, "export %s=%s\n", kv[0], shellQuote(kv[1])); err != nil {
			return err
		}
	}
	return nil
}

// envSuffix turns "region-a" into "A" and "rack-b" into "B".
func envSuffix(name, prefix string) string {
	return strings.ToUpper(strings.ReplaceAll(strings.TrimPrefix(name, prefix), "-", "_"))
}

// shellQuote quotes s for a POSIX shell unless it is made of safe characters only.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@=+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
