package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ironflow/ironflow/internal/atomicfile"
)

// DebianOptions are a build from Debian's packages.
type DebianOptions struct {
	CacheDir string // packages, their unpacked trees and built images
	// KernelDeb and BusyboxDeb, when set, are used instead of the current packages.
	KernelDeb, BusyboxDeb string
	Agent                 string   // a static ironflow binary
	Modules               []string // nil means DefaultModules
	Epoch                 time.Time
	Out                   string
}

// DefaultCacheDir is the user's cache directory's ironflow/image.
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: %w", err)
	}
	return filepath.Join(dir, "ironflow", "image"), nil
}

// BuildFromDebian builds the image from Debian's packages into o.Out. An image built before
// from the same inputs (the packages, the agent binary's SHA-256, the modules, the epoch and
// this package's init) is copied from CacheDir/images/<key of the inputs> instead: a build
// takes most of a minute on a busy host, a copy a moment. cached says which it was.
func BuildFromDebian(ctx context.Context, o DebianOptions) (res Result, cached bool, err error) {
	// Before anything is fetched: a dynamic binary would fail the build after the download.
	if err := checkStatic(o.Agent); err != nil {
		return Result{}, false, fmt.Errorf("ironflow binary: %w", err)
	}
	var src Sources
	if o.KernelDeb != "" || o.BusyboxDeb != "" {
		if o.KernelDeb == "" || o.BusyboxDeb == "" {
			return Result{}, false, fmt.Errorf("name both the kernel and the busybox-static package, or neither")
		}
		src, err = Unpack(ctx, o.CacheDir, o.KernelDeb, o.BusyboxDeb)
	} else {
		src, err = FetchDebian(ctx, o.CacheDir)
	}
	if err != nil {
		return Result{}, false, err
	}
	agentSum, err := fileSHA256(o.Agent)
	if err != nil {
		return Result{}, false, fmt.Errorf("ironflow binary: %w", err)
	}
	if o.Modules == nil {
		o.Modules = DefaultModules
	}
	key, err := json.Marshal(struct {
		Packages     []string
		Agent        string
		Modules      []string
		Epoch        int64
		Init, UDHCPC []byte
	}{src.Packages, agentSum, o.Modules, o.Epoch.Unix(), initScript, udhcpcScript})
	if err != nil {
		return Result{}, false, err
	}
	sum := sha256.Sum256(key)
	store := filepath.Join(o.CacheDir, "images", hex.EncodeToString(sum[:16]))
	unlock, err := lockCache(o.CacheDir)
	if err != nil {
		return Result{}, false, err
	}
	defer unlock()
	// A cache entry that is gone or damaged is built again.
	if res, err := readResult(store); err == nil {
		if res, err := copyResult(res, o.Out, false); err == nil {
			now := time.Now()
			return res, true, os.Chtimes(store, now, now) // recently used: kept by pruneImages
		}
	}
	res, err = Build(Options{KernelTree: src.KernelTree, Busybox: src.Busybox, Agent: o.Agent, Modules: o.Modules,
		Epoch: o.Epoch, Release: fmt.Sprint(src.Packages), Out: o.Out})
	if err != nil {
		return Result{}, false, err
	}
	if _, err := copyResult(res, store, true); err != nil {
		return Result{}, false, fmt.Errorf("cache the image: %w", err)
	}
	return res, false, pruneImages(filepath.Dir(store), keptImages)
}

// keptImages is how many built images the cache keeps: every change of the ironflow binary
// is a new one, about 25 MB each.
const keptImages = 4

// pruneImages removes all but the newest keep images of the cache.
func pruneImages(dir string, keep int) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	type built struct {
		path string
		at   time.Time
	}
	var images []built
	for _, e := range entries {
		if info, err := e.Info(); err == nil && e.IsDir() {
			images = append(images, built{filepath.Join(dir, e.Name()), info.ModTime()})
		}
	}
	slices.SortFunc(images, func(a, b built) int { return b.at.Compare(a.at) })
	for _, old := range images[min(keep, len(images)):] {
		if err := os.RemoveAll(old.path); err != nil {
			return fmt.Errorf("prune the image cache: %w", err)
		}
	}
	return nil
}

const resultFile = "result.json"

// copyResult copies a built image's files into dir, refusing files that no longer have the
// SHA-256 res names; withResult writes res too, last, so a cache entry with a result is whole.
func copyResult(res Result, dir string, withResult bool) (Result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, err
	}
	out := res
	for _, a := range []*Artifact{&out.Kernel, &out.Initrd} {
		data, err := os.ReadFile(a.Path)
		if err != nil {
			return Result{}, err
		}
		want := a.SHA256
		if *a, err = writeArtifact(filepath.Join(dir, filepath.Base(a.Path)), data); err != nil {
			return Result{}, err
		}
		if a.SHA256 != want {
			return Result{}, fmt.Errorf("%s: SHA-256 %s, built as %s", a.Path, a.SHA256, want)
		}
	}
	if !withResult {
		return out, nil
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return Result{}, err
	}
	return out, atomicfile.Write(filepath.Join(dir, resultFile), data)
}

func readResult(dir string) (Result, error) {
	var res Result
	data, err := os.ReadFile(filepath.Join(dir, resultFile))
	if err != nil {
		return res, err
	}
	return res, json.Unmarshal(data, &res)
}
