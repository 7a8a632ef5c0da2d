package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/dev/temporalserver"
	"github.com/ironflow/ironflow/workflows"
)

func writeRegionsFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "regions.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startOwnDevServer starts a Temporal dev server of the test's own (a fresh namespace, no
// search attributes) and a client of it; both stop with the test.
func startOwnDevServer(ctx context.Context, t *testing.T) (*temporalserver.Server, client.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the Temporal dev server")
	}
	srv, err := temporalserver.Start(ctx, temporalserver.Options{Headless: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	tc, err := client.DialContext(ctx, client.Options{HostPort: srv.Address, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	return srv, tc
}

// TestWorkerRegistersAndPollsUntilInterrupted runs `ironflow worker` against its own dev
// server, which starts without Ironflow's search attributes.
func TestWorkerRegistersAndPollsUntilInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, tc := startOwnDevServer(ctx, t)
	attrs, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: defaultNamespace})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := attrs.GetCustomAttributes()[workflows.MachineUuidKey.GetName()]; ok {
		t.Fatal("the dev server already has the search attributes: the test would prove nothing")
	}
	path := writeRegionsFile(t, "regions:\n  region-a: {url: \"http://127.0.0.1:1\", token: a}\n  region-b: {url: \"http://127.0.0.1:2\", token: b}\n")
	t.Setenv("TEMPORAL_ADDRESS", srv.Address) // the Temporal CLI's variable works too
	t.Setenv("IRONFLOW_REGIONS_FILE", path)

	workerCtx, stop := context.WithCancel(ctx)
	defer stop()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() { done <- ironflowTo(workerCtx, &out, &errOut, "", "worker") }()

	eventually(t, func() string {
		select {
		case code := <-done:
			t.Fatalf("worker exited with %d: %s", code, errOut.String())
		default:
		}
		attrs, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: defaultNamespace})
		if err != nil {
			return err.Error()
		}
		for _, key := range workflows.SearchAttributes() {
			if _, ok := attrs.GetCustomAttributes()[key.GetName()]; !ok {
				return "search attribute " + key.GetName() + " not registered"
			}
		}
		for _, kind := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
			tq, err := tc.DescribeTaskQueue(ctx, workflows.TaskQueue, kind)
			if err != nil {
				return err.Error()
			}
			if len(tq.GetPollers()) == 0 {
				return fmt.Sprintf("no %s poller on %s", kind, workflows.TaskQueue)
			}
		}
		return ""
	})

	stop()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("interrupted worker exited with %d: %s", code, errOut.String())
		}
	case <-ctx.Done():
		t.Fatal("worker did not stop when interrupted")
	}
	if log := errOut.String(); !strings.Contains(log, "migration worker running") || !strings.Contains(log, "migration worker stopped") {
		t.Errorf("worker log:\n%s", log)
	}
	if out.String() != "" {
		t.Errorf("worker wrote to stdout: %q", out.String())
	}
}

func TestWorkerRefusesABadRegionsFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.yaml")
	tests := []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"missing file", []string{"--regions-file", missing}, "", "regions file: open " + missing},
		{"from the environment", nil, missing, "regions file: open " + missing},
		{"no regions", []string{"--regions-file", writeRegionsFile(t, "regions: {}\n")}, "", "no regions configured"},
		{"misspelt field", []string{"--regions-file", writeRegionsFile(t, "regions:\n  a: {url: \"http://x:1\", tokn: t}\n")}, "", `unknown field "tokn"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("IRONFLOW_REGIONS_FILE", tt.env)
			}
			// Nothing listens there: the file is refused before any connection is tried.
			args := append([]string{"worker", "--temporal-address", "127.0.0.1:1"}, tt.args...)
			code, out, stderr := ironflow(t, "", args...)
			if code == 0 || !strings.Contains(stderr, tt.want) || strings.Contains(stderr, "connect to Temporal") {
				t.Errorf("exit %d, stdout %q, stderr %q; want an error with %q", code, out, stderr, tt.want)
			}
		})
	}
}

func TestNotPermitted(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("add search attributes to default: %w", serviceerror.NewPermissionDenied("no", "")), true},
		{serviceerror.NewUnimplemented("operator service"), true},
		{serviceerror.NewUnavailable("down"), false},
		{errors.New("list search attributes of default: boom"), false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := notPermitted(tt.err); got != tt.want {
			t.Errorf("notPermitted(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestTemporalFlagFallbacks(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"default", nil, nil, defaultTemporalAddress},
		{"Temporal's variable", nil, map[string]string{"TEMPORAL_ADDRESS": "t:1"}, "t:1"},
		{"Ironflow's variable first", nil, map[string]string{"TEMPORAL_ADDRESS": "t:1", "IRONFLOW_TEMPORAL_ADDRESS": "i:1"}, "i:1"},
		{"flag first", []string{"--temporal-address", "f:1"}, map[string]string{"TEMPORAL_ADDRESS": "t:1", "IRONFLOW_TEMPORAL_ADDRESS": "i:1"}, "f:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, env := range []string{"IRONFLOW_TEMPORAL_ADDRESS", "TEMPORAL_ADDRESS"} {
				t.Setenv(env, "")
				os.Unsetenv(env)
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var got string
			c := withEnvFallbacks(&cobra.Command{Use: "x", RunE: func(cmd *cobra.Command, _ []string) error {
				got = flagValue(cmd, flagTemporalAddress)
				return nil
			}})
			addTemporalFlags(c)
			c.SetArgs(tt.args)
			if err := c.Execute(); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("address %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTemporalOptions(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		apiKey   string
		wantTLS  bool
		wantCred bool
	}{
		{"plain", nil, "", false, false},
		{"tls", []string{"--temporal-tls"}, "", true, false},
		{"api key implies tls", nil, "k3y", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("TEMPORAL_API_KEY", tt.apiKey)
			var opts client.Options
			c := withEnvFallbacks(&cobra.Command{Use: "x", RunE: func(cmd *cobra.Command, _ []string) error {
				var err error
				opts, err = temporalOptions(cmd, cliLogger(cmd))
				return err
			}})
			addTemporalFlags(c)
			c.SetArgs(append(tt.args, "--namespace", "ns1"))
			if err := c.Execute(); err != nil {
				t.Fatal(err)
			}
			if got := opts.ConnectionOptions.TLS != nil; got != tt.wantTLS {
				t.Errorf("TLS %v, want %v", got, tt.wantTLS)
			}
			if got := opts.Credentials != nil; got != tt.wantCred {
				t.Errorf("credentials %v, want %v", got, tt.wantCred)
			}
			if opts.Namespace != "ns1" || opts.Logger == nil {
				t.Errorf("options %+v", opts)
			}
		})
	}
}
