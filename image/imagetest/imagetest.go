// Package imagetest gives tests the discovery image built from this source tree: the static
// ironflow binary built with the Go toolchain, Debian's current packages fetched into a
// cache shared between test runs (IRONFLOW_IMAGE_CACHE, default image.DefaultCacheDir).
package imagetest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/image"
)

// CacheDirEnv names the cache of Debian packages and built images the tests share.
const CacheDirEnv = "IRONFLOW_IMAGE_CACHE"

// Skip skips the test where the image cannot be built: without apt-get and dpkg-deb (a
// Debian host), or in -short runs (the first build downloads about 70 MB).
func Skip(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping the discovery image build in -short mode")
	}
	for _, tool := range []string{"apt-get", "apt-cache", "dpkg-deb", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s is not installed (the discovery image is built from Debian packages)", tool)
		}
	}
}

// CacheDir is the tests' shared cache directory: CacheDirEnv, the user's cache directory, or
// without one (no HOME) the system's temporary directory.
func CacheDir(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv(CacheDirEnv); dir != "" {
		return dir
	}
	if dir, err := image.DefaultCacheDir(); err == nil {
		return dir
	}
	return filepath.Join(os.TempDir(), "ironflow-image-cache")
}

// StaticAgent builds this tree's ironflow binary static (CGO_ENABLED=0, -trimpath, so the
// same source gives the same bytes) into dir.
func StaticAgent(t testing.TB, dir string) string {
	t.Helper()
	root, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	bin := filepath.Join(dir, "ironflow")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/ironflow")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(root)))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the static ironflow binary: %v: %s", err, out)
	}
	return bin
}

// Build builds the discovery image of this tree into out (from the shared cache when built
// before from the same inputs) and logs how long it took and its size.
func Build(t testing.TB, out string) image.Result {
	t.Helper()
	Skip(t)
	start := time.Now()
	agent := StaticAgent(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, cached, err := image.BuildFromDebian(ctx, image.DebianOptions{CacheDir: CacheDir(t), Agent: agent, Out: out, Epoch: time.Unix(0, 0)})
	if err != nil {
		t.Fatalf("build the discovery image: %v", err)
	}
	t.Logf("discovery image (cached: %v) in %s: kernel %d bytes, initramfs %d bytes", cached, time.Since(start).Round(time.Millisecond), res.Kernel.Size, res.Initrd.Size)
	return res
}
