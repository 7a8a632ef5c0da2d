package dev

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/image"
)

// TestPlaceDiscoveryImage: the rack's boot dir gets the image as discovery/vmlinuz and
// discovery/initrd.img, the files the enlistment script chains to; a directory without
// them is refused naming how to build them.
func TestPlaceDiscoveryImage(t *testing.T) {
	src, boot := t.TempDir(), t.TempDir()
	files := map[string][]byte{image.KernelFile: []byte("kernel"), image.InitrdFile: []byte("initramfs")}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := placeDiscoveryImage(src, boot); err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(boot, DiscoveryBootEnv, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("boot dir's discovery/%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if err := placeDiscoveryImage(t.TempDir(), boot); err == nil || !strings.Contains(err.Error(), "make image") {
		t.Fatalf("placing an empty directory = %v, want an error naming make image", err)
	}
}
