package image_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/image"
	"github.com/ironflow/ironflow/image/imagetest"
)

// TestBuildIsReproducible builds the discovery image from Debian's packages twice, from the
// same inputs into two directories, and wants the same SHA-256 for the kernel and the
// initramfs; it reports their sizes. The initramfs holds every module the defaults need,
// each after its dependencies.
func TestBuildIsReproducible(t *testing.T) {
	imagetest.Skip(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src, err := image.FetchDebian(ctx, imagetest.CacheDir(t))
	if err != nil {
		t.Fatal(err)
	}
	agent := imagetest.StaticAgent(t, t.TempDir())
	var results []image.Result
	for range 2 {
		start := time.Now()
		res, err := image.Build(image.Options{KernelTree: src.KernelTree, Busybox: src.Busybox, Agent: agent, Epoch: time.Unix(0, 0),
			Release: strings.Join(src.Packages, " "), Out: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("built from %v in %s: vmlinuz %d bytes (sha256 %s), initrd.img %d bytes (sha256 %s)", src.Packages,
			time.Since(start).Round(time.Millisecond), res.Kernel.Size, res.Kernel.SHA256, res.Initrd.Size, res.Initrd.SHA256)
		results = append(results, res)
	}
	if results[0].Kernel.SHA256 != results[1].Kernel.SHA256 || results[0].Initrd.SHA256 != results[1].Initrd.SHA256 {
		t.Fatalf("two builds from the same inputs differ: %+v and %+v", results[0], results[1])
	}

	order := results[0].Modules
	pos := map[string]int{}
	for i, m := range order {
		pos[image.ModuleName(m)] = i
	}
	for _, m := range image.DefaultModules {
		if _, ok := pos[m]; !ok {
			t.Errorf("module %s is not in the image (load order %v)", m, order)
		}
	}
	for mod, deps := range map[string][]string{"virtio_net": {"net_failover", "failover", "virtio", "virtio_ring"}, "ipmi_si": {"ipmi_msghandler"}, "ahci": {"libahci", "libata"}} {
		for _, d := range deps {
			if pos[d] >= pos[mod] {
				t.Errorf("module %s (at %d) loads before %s (at %d), which it needs", mod, pos[mod], d, pos[d])
			}
		}
	}
	var inImage []string
	initrd, err := os.ReadFile(results[0].Initrd.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range image.ReadArchive(t, initrd) {
		inImage = append(inImage, h.Name)
	}
	for _, want := range []string{"init", "bin/busybox", "bin/ironflow", "etc/ironflow/modules", "lib/modules/" + results[0].KernelRelease + "/" + order[0]} {
		if !slices.Contains(inImage, want) {
			t.Errorf("the initramfs has no %s", want)
		}
	}

	if _, err := image.Build(image.Options{KernelTree: src.KernelTree, Busybox: src.Busybox, Agent: agent, Modules: []string{"no_such_driver"}, Out: t.TempDir()}); err == nil ||
		!strings.Contains(err.Error(), "no_such_driver is not in the kernel") {
		t.Fatalf("a build with an unknown module = %v, want it named as not in the kernel", err)
	}
}
