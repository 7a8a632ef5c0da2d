package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/dev/seeddata"
)

// Well-known dev ports, so URLs stay the same across restarts of `ironflow dev`.
var (
	devRegionPorts    = []int{5240, 5241}
	devTemporalPort   = 7233
	devTemporalUIPort = 8233
)

func newDevCommand() *cobra.Command {
	var fresh, demo, teardown bool
	var flags devFlags
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole system on this machine: PostgreSQL, Temporal, two regions, a worker",
		Long: `Runs the embedded default stack in the foreground until Ctrl-C: a throwaway PostgreSQL,
the Temporal dev server with its web UI, regions region-a and region-b seeded with the
Digital Rebar migration doc's machines, and a migration worker. State (PostgreSQL's data
included) is kept in --state-dir across restarts unless --fresh; one stack runs on a state
dir at a time. --teardown removes a stopped stack's state dir, leaving nothing behind.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logs, err := logFlags(cmd)
			if err != nil {
				return err
			}
			if demo {
				return runDemo(cmd, logs)
			}
			stateDir, err := flags.absStateDir()
			if err != nil {
				return err
			}
			freePorts := flags.FreePorts
			if teardown {
				if err := dev.Teardown(stateDir); err != nil {
					return fmt.Errorf("--teardown: %w", err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", stateDir)
				return nil
			}
			// Taken before anything in the state dir changes: a second `dev` leaves a running
			// stack alone.
			lock, err := dev.LockStateDir(stateDir)
			if err != nil {
				return err
			}
			defer lock.Unlock()
			if fresh {
				if err := lock.Clear(); err != nil {
					return fmt.Errorf("--fresh: %w", err)
				}
			}
			logFile, err := openDevLog(stateDir)
			if err != nil {
				return err
			}
			defer logFile.Close()
			fmt.Fprintln(cmd.OutOrStdout(), "starting PostgreSQL, Temporal, region-a and region-b with a rack each, and a worker...")
			regionPorts, temporalPort, uiPort := devRegionPorts, devTemporalPort, devTemporalUIPort
			if freePorts {
				regionPorts, temporalPort, uiPort = nil, 0, 0
			}
			stack, err := dev.StartStack(cmd.Context(), dev.StackOptions{
				StateDir:        stateDir,
				Lock:            lock,
				RegionPorts:     regionPorts,
				TemporalPort:    temporalPort,
				TemporalUIPort:  uiPort,
				Seed:            true,
				RunWorker:       true,
				RackLinks:       true,
				Logger:          logs.logger(logFile),
				TemporalLogFile: filepath.Join(stateDir, "temporal.log"),
				Version:         version,
				DiscoveryImage:  flags.DiscoveryImage,
			})
			if err != nil {
				return portsHint(err, freePorts)
			}
			defer stack.Stop()
			// Ready means ready for the README: its rack transfer refuses a rack that is not
			// online yet.
			for _, rack := range stack.Racks {
				if err := stack.WaitRackOnline(cmd.Context(), rack.Name); err != nil {
					return err
				}
			}
			if err := stack.WriteStackFile(); err != nil {
				return err
			}
			printDevBanner(cmd.OutOrStdout(), stack, logFile.Name())
			<-cmd.Context().Done()
			fmt.Fprintln(cmd.OutOrStdout(), "\nstopping...")
			return nil
		},
	}
	flags.declare(cmd.Flags())
	cmd.Flags().BoolVar(&fresh, "fresh", false, "start from an empty state dir (and a freshly seeded system)")
	cmd.Flags().BoolVar(&teardown, "teardown", false, "remove the state dir of a stopped stack and everything the stack keeps (PostgreSQL's data included), then exit")
	cmd.Flags().BoolVar(&demo, "demo", false, "start a fresh throwaway stack on free ports, replay the migration story with the CLI, and exit")
	cmd.MarkFlagsMutuallyExclusive("teardown", "fresh")
	cmd.MarkFlagsMutuallyExclusive("teardown", "demo")
	addLogFlags(cmd)
	cmd.AddCommand(newDevEnvCommand())
	return cmd
}

// portsHint adds to a start failure on a port in use how to run a second stack.
func portsHint(err error, freePorts bool) error {
	if freePorts || !errors.Is(err, syscall.EADDRINUSE) && !strings.Contains(err.Error(), "address already in use") {
		return err
	}
	return fmt.Errorf("%w\n(another stack, perhaps a running make dev, holds the ports: stop it, or start a second one with: bin/ironflow dev --free-ports --state-dir DIR)", err)
}

// devFlags are the flags of dev that configure the stack; --fresh, --teardown and --demo are
// what this one run does, so they have no variables.
type devFlags struct {
	StateDir  string
	FreePorts bool
	// DiscoveryImage is set by `make dev` (IRONFLOW_DEV_DISCOVERY_IMAGE) to the image `make
	// image` built.
	DiscoveryImage string
}

func (f *devFlags) declare(fs *pflag.FlagSet) {
	e := devScope.on(fs)
	e.string(&f.StateDir, "state-dir", ".ironflow-dev", "where the stack keeps its state")
	e.bool(&f.FreePorts, "free-ports", false, "listen on free ports instead of 5240, 5241, 7233 and 8233, for a second stack")
	e.string(&f.DiscoveryImage, "discovery-image", "", "directory of the discovery image (vmlinuz, initrd.img; make image builds it) to put in each rack's boot dir, so unknown machines boot it to enlist")
}

// absStateDir is --state-dir as an absolute path, resolved before any process of the stack
// (which run in other directories) sees it.
func (f *devFlags) absStateDir() (string, error) {
	dir, err := filepath.Abs(f.StateDir)
	if err != nil {
		return "", fmt.Errorf("--state-dir: %w", err)
	}
	return dir, nil
}

func openDevLog(stateDir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(stateDir, "ironflow.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("dev log: %w", err)
	}
	return f, nil
}

func rackLines(s *dev.Stack) string {
	var b strings.Builder
	for _, region := range dev.RegionNames {
		rk := s.Racks[dev.RackNames[region]]
		if rk == nil {
			continue
		}
		fmt.Fprintf(&b, "  %-17s (region %s)\n", rk.Name, region)
		for _, svc := range [][2]string{{"HTTP boot", rk.HTTPURL}, {"broadcast DHCP", dhcpLine(rk)}, {"DHCP relay", rk.DHCPRelay + " (UDP, relayed requests)"}, {"TFTP", rk.TFTP + " (UDP)"}, {"DNS", rk.DNS + " (UDP and TCP)"}, {"syslog", rk.Syslog + " (UDP and TCP)"}, {"HTTP proxy", "http://" + rk.Proxy + " (machines of the rack's subnets)"}} {
			fmt.Fprintf(&b, "    %-15s %s\n", svc[0], svc[1])
		}
		if rk.Link != nil {
			fmt.Fprintf(&b, "    %-15s sudo ip netns exec %s dhclient -v %s\n", "a machine", rk.Link.MachinesNetns, rk.Link.MachinesInterface)
		}
	}
	return b.String()
}

// dhcpLine is where the rack answers broadcast DHCP, or why it does not.
func dhcpLine(rk *dev.Rack) string {
	if rk.Link == nil {
		return "off: " + rk.DHCPOff + " (relayed DHCP still answers)"
	}
	return fmt.Sprintf("%s %s (UDP 67) in netns %s; its machines' end %s in netns %s",
		rk.Link.Interface, rk.Link.Address.Addr(), rk.Link.Netns, rk.Link.MachinesInterface, rk.Link.MachinesNetns)
}

func printDevBanner(w io.Writer, s *dev.Stack, logPath string) {
	a, b := s.Regions["region-a"].URL, s.Regions["region-b"].URL
	fmt.Fprintf(w, `
Ironflow is running.

  region-a API      %s
  region-b API      %s
%s  Temporal          %s
  Temporal web UI   %s
  codec endpoint    %s (admin tokens)
  admin token       %s
  logs              %s

Try, in another shell:

  export IRONFLOW_TOKEN=%s IRONFLOW_PAYLOAD_KEYS=%s
  bin/ironflow -E %s machines list Pool=default -o table
  bin/ironflow -E %s machines show Name:birdy
  bin/ironflow -E %s machines migrate Name:birdy to "$(bin/ironflow -E %s machines migrateTicket)"
  bin/ironflow -E %s jobs list Machine=%s

Ctrl-C stops everything.
`, a, b, rackLines(s), s.Temporal.Address, s.Temporal.UIURL, s.CodecURL, s.AdminToken, logPath,
		s.AdminToken, s.PayloadKeys, a, a, a, b, b, seeddata.BirdyUUID)
}

// runDemo plays the demo on a throwaway stack (temp state, free ports, so it can run next to
// `ironflow dev`) and fails with the step that went wrong.
func runDemo(cmd *cobra.Command, logs logConfig) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: find the ironflow binary: %w", err)
	}
	logFile, err := os.CreateTemp("", "ironflow-demo-*.log")
	if err != nil {
		return fmt.Errorf("demo log: %w", err)
	}
	defer logFile.Close()
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "starting a fresh stack (logs in %s)...\n", logFile.Name())
	stack, err := dev.StartStack(cmd.Context(), dev.StackOptions{
		TemporalUIPort: -1,
		Seed:           true,
		RunWorker:      true,
		Logger:         logs.logger(logFile),
		Version:        version,
	})
	if err != nil {
		return err
	}
	defer stack.Stop()
	demo := &dev.Demo{Stack: stack, Binary: self, Out: out}
	if err := demo.Run(cmd.Context()); err != nil {
		return err
	}
	fmt.Fprintln(out, "\ndemo finished: every step passed")
	return nil
}
