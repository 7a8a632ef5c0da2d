package dev

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ironflow/ironflow/image"
	"github.com/ironflow/ironflow/internal/atomicfile"
)

// DiscoveryBootEnv is the boot directory's folder of the discovery image, what the rack's
// enlistment script chains unknown machines to (rack.BootEnvBoot("discovery")).
const DiscoveryBootEnv = "discovery"

// placeDiscoveryImage copies the discovery image built in src (`make image`: vmlinuz,
// initrd.img) into bootDir/discovery. Copies, not links: the rack serves only what is inside
// its boot dir.
func placeDiscoveryImage(src, bootDir string) error {
	dst := filepath.Join(bootDir, DiscoveryBootEnv)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, f := range []string{image.KernelFile, image.InitrdFile} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return fmt.Errorf("discovery image: %w (build it with make image)", err)
		}
		if err := atomicfile.Write(filepath.Join(dst, f), data); err != nil {
			return fmt.Errorf("discovery image: %w", err)
		}
	}
	return nil
}
