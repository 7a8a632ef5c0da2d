package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/image"
)

const envSourceDateEpoch = "SOURCE_DATE_EPOCH"

func newImageCommand() *cobra.Command {
	c := &cobra.Command{Use: "image", Short: "Ironflow's discovery image, which unknown machines boot to enlist"}
	c.AddCommand(newImageBuildCommand())
	return c
}

func newImageBuildCommand() *cobra.Command {
	var out, cacheDir, kernelDeb, busyboxDeb, agent string
	var modules []string
	c := &cobra.Command{
		Use:   "build --out DIR",
		Short: "Build the discovery image (vmlinuz, initrd.img) from Debian's kernel and busybox-static",
		Long: "Build the discovery image into --out: Debian's " + image.KernelMetapackage + " kernel (vmlinuz) and an\n" +
			"initramfs (initrd.img) with this static ironflow binary (or --agent), " + image.BusyboxPackage + ",\n" +
			"the kernel modules servers need (--module) and an init that brings up the boot NIC by DHCP,\n" +
			"runs `ironflow agent enlist` against ironflow.url= of the kernel command line, sends its\n" +
			"console to ironflow.syslog=HOST:PORT when named, then powers off (ironflow.after=wait waits).\n" +
			"The packages are fetched with apt-get download and unpacked with dpkg-deb into --cache,\n" +
			"nothing is installed; --kernel-deb and --busybox-deb use given packages instead. The build\n" +
			"is reproducible: the same inputs and " + envSourceDateEpoch + " (every file's time, default 0) give\n" +
			"the same SHA-256, which it prints with each file's size. Put the files in a rack's boot\n" +
			"directory as discovery/vmlinuz and discovery/initrd.img.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			epoch, err := sourceDateEpoch()
			if err != nil {
				return err
			}
			if agent == "" {
				if agent, err = os.Executable(); err != nil {
					return fmt.Errorf("this binary's path: %w", err)
				}
			}
			if cacheDir == "" {
				if cacheDir, err = image.DefaultCacheDir(); err != nil {
					return err
				}
			}
			res, cached, err := image.BuildFromDebian(cmd.Context(), image.DebianOptions{CacheDir: cacheDir,
				KernelDeb: kernelDeb, BusyboxDeb: busyboxDeb, Agent: agent, Modules: modules, Epoch: epoch, Out: out})
			if err != nil {
				return err
			}
			if cached {
				fmt.Fprintf(cmd.ErrOrStderr(), "the same inputs were built before: copied from %s\n", cacheDir)
			}
			return render(cmd, res, []image.Artifact{res.Kernel, res.Initrd}, artifactColumns)
		},
	}
	c.Flags().StringVar(&out, "out", "", "directory to write vmlinuz and initrd.img to")
	c.MarkFlagRequired("out")
	c.Flags().StringVar(&cacheDir, "cache", "", "directory for the packages and built images (default: the user's cache dir's ironflow/image)")
	c.Flags().StringVar(&kernelDeb, "kernel-deb", "", "a linux-image .deb to use instead of the current "+image.KernelMetapackage)
	c.Flags().StringVar(&busyboxDeb, "busybox-deb", "", "a "+image.BusyboxPackage+" .deb to use instead of the current one")
	c.Flags().StringVar(&agent, "agent", "", "the static ironflow binary to put in the image (default: this one)")
	c.Flags().StringSliceVar(&modules, "module", nil, "kernel modules to load at boot, with their dependencies (default: the common server and VM drivers)")
	return c
}

var artifactColumns = []column[image.Artifact]{
	{"FILE", func(a image.Artifact) string { return a.Path }},
	{"SIZE", func(a image.Artifact) string { return strconv.FormatInt(a.Size, 10) }},
	{"SHA256", func(a image.Artifact) string { return a.SHA256 }},
}

// sourceDateEpoch is SOURCE_DATE_EPOCH's time, the Unix epoch without it.
func sourceDateEpoch() (time.Time, error) {
	v := os.Getenv(envSourceDateEpoch)
	if v == "" {
		return time.Unix(0, 0), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("%s=%q: want seconds since 1970", envSourceDateEpoch, v)
	}
	return time.Unix(n, 0), nil
}
