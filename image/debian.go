package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Debian packages the image is built from: the kernel metapackage (whose one dependency is
// the versioned kernel package) and the static busybox.
const (
	KernelMetapackage = "linux-image-amd64"
	BusyboxPackage    = "busybox-static"
	busyboxInPackage  = "bin/busybox"
)

// Sources are the unpacked packages a build reads.
type Sources struct {
	KernelTree string   // the kernel package's files
	Busybox    string   // the static busybox binary
	Packages   []string // the .deb files used, package_version_arch: the inputs' names
}

// FetchDebian brings the current Debian kernel and busybox-static packages into cacheDir
// with apt-get download (once per version: a .deb already there with the archive's SHA-256
// is kept) and unpacks them there with dpkg-deb -x, installing nothing on this host.
func FetchDebian(ctx context.Context, cacheDir string) (Sources, error) {
	unlock, err := lockCache(cacheDir)
	if err != nil {
		return Sources{}, err
	}
	defer unlock()
	kernelPkg, err := kernelPackage(ctx)
	if err != nil {
		return Sources{}, err
	}
	debs := filepath.Join(cacheDir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return Sources{}, err
	}
	var files []string
	for _, pkg := range []string{kernelPkg, BusyboxPackage} {
		f, err := download(ctx, debs, pkg)
		if err != nil {
			return Sources{}, err
		}
		files = append(files, f)
	}
	return unpackSources(ctx, cacheDir, files[0], files[1])
}

// Unpack unpacks a kernel and a busybox-static .deb under cacheDir/trees (once per file name).
func Unpack(ctx context.Context, cacheDir, kernelDeb, busyboxDeb string) (Sources, error) {
	unlock, err := lockCache(cacheDir)
	if err != nil {
		return Sources{}, err
	}
	defer unlock()
	return unpackSources(ctx, cacheDir, kernelDeb, busyboxDeb)
}

// lockCache holds cacheDir's lock until unlock: test binaries of several packages and a
// developer's make image share one cache, and a second writer would see a half-downloaded
// package or find the tree it unpacks already there.
func lockCache(cacheDir string) (unlock func(), err error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(cacheDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the image cache %s: %w", cacheDir, err)
	}
	return func() { f.Close() }, nil // closing the file releases its lock
}

func unpackSources(ctx context.Context, cacheDir, kernelDeb, busyboxDeb string) (Sources, error) {
	s := Sources{Packages: []string{debName(kernelDeb), debName(busyboxDeb)}}
	var err error
	if s.KernelTree, err = unpack(ctx, cacheDir, kernelDeb); err != nil {
		return Sources{}, err
	}
	bbTree, err := unpack(ctx, cacheDir, busyboxDeb)
	if err != nil {
		return Sources{}, err
	}
	s.Busybox = filepath.Join(bbTree, busyboxInPackage)
	return s, nil
}

func debName(path string) string { return strings.TrimSuffix(filepath.Base(path), ".deb") }

// kernelPackage is the versioned kernel package the metapackage depends on.
func kernelPackage(ctx context.Context) (string, error) {
	out, err := run(ctx, "", "apt-cache", "depends", KernelMetapackage)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(out) {
		if dep, ok := strings.CutPrefix(strings.TrimSpace(line), "Depends: "); ok && strings.HasPrefix(dep, "linux-image-") {
			return strings.TrimSpace(dep), nil
		}
	}
	return "", fmt.Errorf("apt-cache depends %s names no kernel package (run apt-get update?)", KernelMetapackage)
}

// download fetches pkg's candidate .deb into dir unless a file with its SHA-256 is there.
func download(ctx context.Context, dir, pkg string) (string, error) {
	// apt-get prints nothing for a package whose file is in its working directory already,
	// so it is asked in an empty one.
	empty, err := os.MkdirTemp("", "ironflow-apt-")
	if err != nil {
		return "", err
	}
	defer os.Remove(empty)
	out, err := run(ctx, empty, "apt-get", "download", "--print-uris", pkg)
	if err != nil {
		return "", err
	}
	// 'URI' file size SHA256:hex
	f := strings.Fields(out)
	if len(f) < 4 || !strings.HasPrefix(f[3], "SHA256:") {
		return "", fmt.Errorf("apt-get download --print-uris %s: unexpected answer %q", pkg, out)
	}
	file, want := filepath.Join(dir, f[1]), strings.TrimPrefix(f[3], "SHA256:")
	if got, err := fileSHA256(file); err == nil && got == want {
		return file, nil
	}
	if _, err := run(ctx, dir, "apt-get", "download", "-q", pkg); err != nil {
		return "", err
	}
	got, err := fileSHA256(file)
	if err != nil {
		return "", err
	}
	if got != want {
		return "", fmt.Errorf("%s: SHA-256 %s, the archive says %s", file, got, want)
	}
	return file, nil
}

// unpack extracts deb under cacheDir/trees/<its name> unless it is there already; the
// directory appears whole or not at all.
func unpack(ctx context.Context, cacheDir, deb string) (string, error) {
	tree := filepath.Join(cacheDir, "trees", debName(deb))
	if _, err := os.Stat(tree); err == nil {
		return tree, nil
	}
	if err := os.MkdirAll(filepath.Dir(tree), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(tree), ".unpack-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if _, err := run(ctx, "", "dpkg-deb", "-x", deb, tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, tree); err != nil {
		return "", fmt.Errorf("unpack %s: %w", deb, err)
	}
	return tree, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func run(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
