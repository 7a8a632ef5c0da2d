package bootfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// newTree builds a boot dir with a file, a subdirectory, an inside symlink, two escaping
// symlinks and a FIFO with no writer (and a symlink to it), next to a secret file outside it.
func newTree(t testing.TB) *Dir {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "boot")
	mustWrite(t, filepath.Join(base, "secret"), "outside")
	mustWrite(t, filepath.Join(root, "pxelinux.0"), "pxe")
	mustWrite(t, filepath.Join(root, "images", "vmlinuz"), "kernel")
	mustSymlink(t, "images/vmlinuz", filepath.Join(root, "kernel-link"))
	mustSymlink(t, "../secret", filepath.Join(root, "escape-rel"))
	mustSymlink(t, filepath.Join(base, "secret"), filepath.Join(root, "escape-abs"))
	mustSymlink(t, base, filepath.Join(root, "images", "up"))
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "fifo", filepath.Join(root, "fifo-link"))
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func mustWrite(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func TestOpenFile(t *testing.T) {
	d := newTree(t)
	tests := []struct {
		name    string
		want    string // content, when the open succeeds
		wantErr error
	}{
		{name: "pxelinux.0", want: "pxe"},
		{name: "images/vmlinuz", want: "kernel"},
		{name: "./images//vmlinuz", want: "kernel"},
		{name: "kernel-link", want: "kernel"},
		{name: "", wantErr: ErrInvalidName},
		{name: "a\x00b", wantErr: ErrInvalidName},
		{name: `images\vmlinuz`, wantErr: ErrInvalidName},
		{name: "/etc/passwd", wantErr: ErrOutside},
		{name: "../secret", wantErr: ErrOutside},
		{name: "images/../../secret", wantErr: ErrOutside},
		{name: "images/..", wantErr: ErrOutside},
		{name: "escape-rel", wantErr: ErrOutside},
		{name: "escape-abs", wantErr: ErrOutside},
		{name: "images/up/secret", wantErr: ErrOutside},
		{name: "images", wantErr: ErrNotRegular},
		{name: ".", wantErr: ErrNotRegular},
		{name: "fifo", wantErr: ErrNotRegular}, // opening it for reading would block
		{name: "fifo-link", wantErr: ErrNotRegular},
		{name: "missing", wantErr: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _, err := d.OpenFile(tt.name)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("OpenFile(%q) error = %v, want %v", tt.name, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenFile(%q): %v", tt.name, err)
			}
			defer f.Close()
			got, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("OpenFile(%q) content %q, want %q", tt.name, got, tt.want)
			}
		})
	}
}

func TestInstallIPXE(t *testing.T) {
	src := t.TempDir()
	mustWrite(t, filepath.Join(src, "undionly.kpxe"), "bios")
	mustWrite(t, filepath.Join(src, "ipxe.efi"), "uefi")
	d := newTree(t)
	copied, err := d.InstallIPXE(src)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(copied, ",") != "undionly.kpxe,ipxe.efi" {
		t.Fatalf("copied %v", copied)
	}
	for name, want := range map[string]string{"undionly.kpxe": "bios", "ipxe.efi": "uefi"} {
		got, err := os.ReadFile(filepath.Join(d.Root(), name))
		if err != nil || string(got) != want {
			t.Fatalf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(d.Root(), "ipxe.pxe")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ipxe.pxe should not exist: %v", err)
	}
}

// TestInstallIPXEKeepsTheOperatorsFiles: an iPXE image already in the boot directory (the
// operator's own build) is never replaced; missing ones are still installed.
func TestInstallIPXEKeepsTheOperatorsFiles(t *testing.T) {
	src := t.TempDir()
	mustWrite(t, filepath.Join(src, "undionly.kpxe"), "bios")
	mustWrite(t, filepath.Join(src, "ipxe.efi"), "uefi")
	d := newTree(t)
	own := filepath.Join(d.Root(), "ipxe.efi")
	mustWrite(t, own, "operator's build with an embedded script")
	copied, err := d.InstallIPXE(src)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(copied, ",") != "undionly.kpxe" {
		t.Fatalf("copied %v, want only undionly.kpxe", copied)
	}
	if got, _ := os.ReadFile(own); string(got) != "operator's build with an embedded script" {
		t.Fatalf("the operator's ipxe.efi was replaced by %q", got)
	}
	if copied, err := d.InstallIPXE(src); err != nil || len(copied) != 0 {
		t.Fatalf("second install copied %v (%v), want nothing", copied, err)
	}
}

// TestInstallIPXEDebian copies the real binaries when the ipxe package is installed.
func TestInstallIPXEDebian(t *testing.T) {
	if _, err := os.Stat(filepath.Join(DebianIPXEDir, "undionly.kpxe")); err != nil {
		t.Skip("Debian ipxe package not installed")
	}
	d := newTree(t)
	copied, err := d.InstallIPXE(DebianIPXEDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range copied {
		want, _ := os.ReadFile(filepath.Join(DebianIPXEDir, name))
		got, err := os.ReadFile(filepath.Join(d.Root(), name))
		if err != nil || string(got) != string(want) {
			t.Fatalf("%s differs from the package copy (%v)", name, err)
		}
	}
}

// FuzzResolve checks the confinement invariant: whatever the name, a resolved path stays inside
// the root, and names with NUL, "..", backslashes or a leading slash never resolve.
func FuzzResolve(f *testing.F) {
	for _, seed := range []string{"pxelinux.0", "images/vmlinuz", "../secret", "/etc/passwd",
		"escape-rel", "images/up/secret", "a\x00b", "kernel-link", "images/../pxelinux.0", "."} {
		f.Add(seed)
	}
	d := newTree(f)
	f.Fuzz(func(t *testing.T, name string) {
		rel, err := d.Resolve(name)
		if err != nil {
			return
		}
		if strings.ContainsAny(name, "\x00\\") || strings.HasPrefix(name, "/") {
			t.Fatalf("Resolve(%q) accepted a forbidden name", name)
		}
		for _, elem := range strings.Split(name, "/") {
			if elem == ".." {
				t.Fatalf("Resolve(%q) accepted ..", name)
			}
		}
		if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			t.Fatalf("Resolve(%q) = %q escapes the root", name, rel)
		}
		real, err := filepath.EvalSymlinks(filepath.Join(d.Root(), rel))
		if err != nil {
			t.Fatalf("resolved path %q vanished: %v", rel, err)
		}
		if real != d.Root() && !strings.HasPrefix(real, d.Root()+"/") {
			t.Fatalf("Resolve(%q) = %q which is %q, outside %q", name, rel, real, d.Root())
		}
	})
}
