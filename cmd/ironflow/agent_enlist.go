package main

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/agent/enlist"
	"github.com/ironflow/ironflow/region/api"
)

func newAgentEnlistCommand() *cobra.Command {
	var flagURL string
	c := &cobra.Command{
		Use:   "enlist",
		Short: "Enlist this machine: report its inventory and commissioning script output to the region",
		Long: "Run in the discovery environment: gather this system's inventory (network interfaces and\n" +
			"MACs, CPU, memory, disks, SMBIOS from /sys/class/dmi/id, the BMC address from `ipmitool lan\n" +
			"print`), run the region's commissioning scripts, and upload both. The region records them\n" +
			"on the machine it matches by a MAC, the SMBIOS UUID or serial, or the BMC address, and\n" +
			"creates a New machine when none matches. --url is the rack (no token needed: the rack\n" +
			"forwards with its own) or a region (with an operator or admin --token); by default the\n" +
			api.KernelParamURL + "= the rack put on the kernel command line. Unreachable endpoints are\n" +
			"retried until interrupted; a refusal (conflicting identities) fails at once. The scripts\n" +
			"fetch through the rack's HTTP proxy (http_proxy) when it names one (" + api.KernelParamProxy + "=).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := daemonLogger(cmd, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			url := cmp.Or(flagURL, enlist.CmdlineURL("/"))
			if url == "" {
				return errors.New("no --url, no " + enlistScope.name("url") + " and no " + api.KernelParamURL + "= on the kernel command line: name the rack or region to enlist with")
			}
			res, err := enlist.Run(cmd.Context(), enlist.Options{URL: url, Token: flagValue(cmd, flagToken), Proxy: enlist.CmdlineProxy("/"), Logger: logger})
			if err != nil {
				return err
			}
			return render(cmd, res, []api.EnlistResult{res}, enlistColumns)
		},
	}
	enlistScope.on(c.Flags()).string(&flagURL, "url", "", "rack or region URL (default: "+api.KernelParamURL+"= of /proc/cmdline)")
	addLogFlags(c)
	return c
}

var enlistColumns = []column[api.EnlistResult]{
	{"MACHINE", func(r api.EnlistResult) string { return r.Name }},
	{"UUID", func(r api.EnlistResult) string { return r.Machine }},
	{"CREATED", func(r api.EnlistResult) string { return cellBool(r.Created) }},
	{"STATUS", func(r api.EnlistResult) string { return r.Status }},
}

// inventoryRows is a machine's enlistment as FIELD/VALUE rows for `machines inventory`.
func inventoryRows(m api.Machine) [][2]string {
	rows := [][2]string{{"Name", m.Name}, {"Status", m.Status}, {"BMCAddress", m.BMCAddress}, {"SystemUUID", m.Fingerprint.SystemUUID}}
	e := m.Enlisted
	if e == nil {
		return append(rows, [2]string{"Enlisted", "never"})
	}
	if b := e.Boot; b != nil {
		rows = append(rows, [2]string{"Boot", fmt.Sprintf("%s %s %s/%s serial %q via rack %s", b.MAC, strings.TrimSpace(b.Manufacturer+" "+b.Product), b.BuildArch, b.Platform, b.Serial, b.Rack)})
	}
	if inv := e.Inventory; inv != nil {
		rows = append(rows,
			[2]string{"Hostname", inv.Hostname},
			[2]string{"CPU", fmt.Sprintf("%d × %s (%s)", inv.CPU.Count, inv.CPU.Model, inv.Arch)},
			[2]string{"Memory", strconv.FormatInt(inv.MemoryMiB, 10) + " MiB"},
			[2]string{"SMBIOS", smbiosCell(inv.SMBIOS)})
		for _, i := range inv.Interfaces {
			rows = append(rows, [2]string{"Interface " + i.Name, strings.TrimSpace(i.MAC + " " + strings.Join(i.Addrs, " "))})
		}
		for _, d := range inv.Disks {
			value := strings.TrimSpace(fmt.Sprintf("%.1f GiB %s", float64(d.SizeBytes)/(1<<30), d.Model))
			if d.Serial != "" {
				value += ", serial " + d.Serial
			}
			rows = append(rows, [2]string{"Disk " + d.Name, value})
		}
	}
	for _, c := range e.Commissioning {
		out := fmt.Sprintf("exit %d, %d bytes of output", c.ExitCode, len(c.Output))
		if c.Truncated {
			out += " (its tail)"
		}
		rows = append(rows, [2]string{"Script " + c.Script, out})
	}
	for _, p := range e.Pending {
		rows = append(rows, [2]string{"Pending " + p.Kind, fmt.Sprintf("%s reported %s by %s", p.Value, cellTime(p.Time), p.By)})
	}
	return append(rows, [2]string{"Enlisted", cellTime(e.Time)})
}

func smbiosCell(s api.SMBIOS) string {
	if s == (api.SMBIOS{}) {
		return "(not readable)"
	}
	return fmt.Sprintf("%s %s, serial %q, UUID %s, BIOS %s %s", s.Manufacturer, s.Product, s.Serial, s.UUID, s.BIOSVendor, s.BIOSVersion)
}

var inventoryColumns = []column[[2]string]{
	{"FIELD", func(r [2]string) string { return r[0] }},
	{"VALUE", func(r [2]string) string { return r[1] }},
}

func newMachinesInventoryCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "inventory KEY",
		Short: "Show what a machine's enlistment recorded: boot facts, hardware inventory, commissioning results",
		Long: "Show what a machine's enlistment recorded (Machine.Enlisted): the facts iPXE reported, the\n" +
			"inventory `ironflow agent enlist` gathered and its commissioning scripts' results. -o table\n" +
			"summarises it; json and yaml print it whole, script output included.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := regionClient(cmd).Machines().Get(cmd.Context(), machines.key(args[0]))
			if err != nil {
				return err
			}
			return render(cmd, m.Enlisted, inventoryRows(m), inventoryColumns)
		},
	}
}
