// Package image builds Ironflow's discovery image, what a machine the region does not know
// boots: Debian's kernel (vmlinuz) and an initramfs (initrd.img) holding the static ironflow
// binary, a static busybox, the kernel modules servers need and an /init that brings up the
// boot NIC, runs `ironflow agent enlist` against the rack on the kernel command line and
// powers off. The same inputs give the same bytes (Build's Result names their SHA-256).
package image

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"debug/elf"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ironflow/ironflow/internal/atomicfile"
)

// The files Build writes into Options.Out, the names the rack's boot env "discovery" serves.
const (
	KernelFile = "vmlinuz"
	InitrdFile = "initrd.img"
)

var (
	//go:embed init.sh
	initScript []byte
	//go:embed udhcpc.sh
	udhcpcScript []byte
)

// Options are a build's inputs; the output depends on nothing else.
type Options struct {
	// KernelTree is an unpacked Debian linux-image package: boot/vmlinuz-<release> and
	// lib/modules/<release>/ (FetchDebian unpacks one).
	KernelTree string
	Busybox    string   // a static busybox binary
	Agent      string   // a static ironflow binary (CGO_ENABLED=0)
	Modules    []string // kernel modules to load at boot; nil means DefaultModules
	// Epoch is every file's modification time in the initramfs (SOURCE_DATE_EPOCH).
	Epoch time.Time
	// Release names the build's inputs in /etc/ironflow/release (package versions).
	Release string
	Out     string // directory the kernel and initramfs are written to
}

// Artifact is one file Build wrote.
type Artifact struct {
	Path   string
	Size   int64
	SHA256 string
}

// Result is what Build wrote.
type Result struct {
	KernelRelease string
	Modules       []string // module files in load order, relative to lib/modules/<release>
	Kernel        Artifact
	Initrd        Artifact
}

// Build writes Out/vmlinuz and Out/initrd.img, each replaced whole.
func Build(o Options) (Result, error) {
	if o.Modules == nil {
		o.Modules = DefaultModules
	}
	for _, bin := range []struct{ what, path string }{{"busybox", o.Busybox}, {"ironflow binary", o.Agent}} {
		if err := checkStatic(bin.path); err != nil {
			return Result{}, fmt.Errorf("%s: %w", bin.what, err)
		}
	}
	kernel, release, err := findKernel(o.KernelTree)
	if err != nil {
		return Result{}, err
	}
	modDir := filepath.Join(o.KernelTree, "lib/modules", release)
	mods, err := readKernelModules(modDir)
	if err != nil {
		return Result{}, err
	}
	order, err := mods.loadOrder(o.Modules)
	if err != nil {
		return Result{}, err
	}

	a := newArchive()
	for _, d := range []string{"/dev", "/proc", "/sys", "/run", "/tmp", "/root", "/etc"} {
		a.addDir(d)
	}
	a.addData("/init", initScript, 0o755)
	a.addData("/etc/ironflow/udhcpc.script", udhcpcScript, 0o755)
	a.addData("/etc/ironflow/modules", []byte(strings.Join(order, "\n")+"\n"), 0o644)
	a.addData("/etc/ironflow/release", []byte(cmp.Or(o.Release, "unnamed")+"\n"), 0o644)
	a.addFile("/bin/busybox", o.Busybox, 0o755)
	a.addFile("/bin/ironflow", o.Agent, 0o755)
	for _, m := range order {
		a.addFile("/lib/modules/"+release+"/"+m, filepath.Join(modDir, m), 0o644)
	}
	var initrd bytes.Buffer
	if err := a.writeTo(&initrd, o.Epoch); err != nil {
		return Result{}, err
	}
	kernelBytes, err := os.ReadFile(kernel)
	if err != nil {
		return Result{}, fmt.Errorf("kernel: %w", err)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return Result{}, err
	}
	res := Result{KernelRelease: release, Modules: order}
	if res.Kernel, err = writeArtifact(filepath.Join(o.Out, KernelFile), kernelBytes); err != nil {
		return Result{}, err
	}
	if res.Initrd, err = writeArtifact(filepath.Join(o.Out, InitrdFile), initrd.Bytes()); err != nil {
		return Result{}, err
	}
	return res, nil
}

func writeArtifact(path string, data []byte) (Artifact, error) {
	if err := atomicfile.Write(path, data); err != nil {
		return Artifact{}, fmt.Errorf("write %s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	return Artifact{Path: path, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}, nil
}

// findKernel finds the one boot/vmlinuz-<release> of an unpacked kernel package.
func findKernel(tree string) (path, release string, err error) {
	found, err := filepath.Glob(filepath.Join(tree, "boot", "vmlinuz-*"))
	if err != nil {
		return "", "", err
	}
	if len(found) != 1 {
		return "", "", fmt.Errorf("kernel tree %s: want one boot/vmlinuz-<release>, found %d", tree, len(found))
	}
	return found[0], strings.TrimPrefix(filepath.Base(found[0]), "vmlinuz-"), nil
}

// checkStatic refuses a binary that needs a dynamic loader: the initramfs has no libc.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			r := io.LimitReader(p.Open(), 256)
			interp, _ := io.ReadAll(r)
			return fmt.Errorf("%s is dynamically linked (interpreter %s): build it static (CGO_ENABLED=0 for ironflow)", path, strings.TrimRight(string(interp), "\x00"))
		}
	}
	if f.Machine != elf.EM_X86_64 {
		return errors.New(path + " is not an x86-64 binary")
	}
	return nil
}
