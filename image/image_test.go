package image

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cavaliergopher/cpio"
)

// readArchive lists the entries of a gzip-compressed cpio.
func readArchive(t *testing.T, data []byte) []*cpio.Header {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	r := cpio.NewReader(zr)
	var hdrs []*cpio.Header
	for {
		h, err := r.Next()
		if err == io.EOF {
			return hdrs
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, h)
	}
}

// TestArchiveIsTheSameWhateverTheOrder: the initramfs's bytes depend on its entries only,
// not on the order they were added in nor on the files' own times and owners; directories
// come before their contents and every entry has the epoch's time and owner root.
func TestArchiveIsTheSameWhateverTheOrder(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "agent")
	if err := os.WriteFile(src, []byte("binary"), 0o700); err != nil {
		t.Fatal(err)
	}
	epoch := time.Unix(1700000000, 0)
	build := func(order []int) []byte {
		a := newArchive()
		adds := []func(){
			func() { a.addData("/init", []byte("#!/bin/sh\n"), 0o755) },
			func() { a.addFile("/bin/ironflow", src, 0o755) },
			func() { a.addData("/lib/modules/6.1/kernel/a.ko", []byte("ko"), 0o644) },
			func() { a.addDir("/proc") },
		}
		for _, i := range order {
			adds[i]()
		}
		var b bytes.Buffer
		if err := a.writeTo(&b, epoch); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	first := build([]int{0, 1, 2, 3})
	if err := os.Chtimes(src, time.Now(), time.Now()); err != nil { // a rebuilt file, same content
		t.Fatal(err)
	}
	if second := build([]int{3, 2, 1, 0}); !bytes.Equal(first, second) {
		t.Fatal("the same entries added in another order gave another archive")
	}
	var names []string
	for _, h := range readArchive(t, first) {
		names = append(names, h.Name)
		if h.ModTime.Unix() != epoch.Unix() || h.Uid != 0 || h.Guid != 0 {
			t.Errorf("%s: time %v, owner %d:%d; want %v, 0:0", h.Name, h.ModTime, h.Uid, h.Guid, epoch)
		}
	}
	want := []string{"bin", "bin/ironflow", "init", "lib", "lib/modules", "lib/modules/6.1", "lib/modules/6.1/kernel", "lib/modules/6.1/kernel/a.ko", "proc"}
	if !slices.Equal(names, want) {
		t.Fatalf("entries %q, want %q", names, want)
	}
}

// TestBuildRefusesDynamicBinaries: the initramfs has no C library, so a dynamically linked
// agent is refused before anything is built.
func TestBuildRefusesDynamicBinaries(t *testing.T) {
	dynamic, err := os.Executable() // a test binary; check it is dynamic before relying on it
	if err != nil {
		t.Fatal(err)
	}
	if checkStatic(dynamic) == nil {
		dynamic = "/bin/sh"
	}
	if checkStatic(dynamic) == nil {
		t.Skip("no dynamically linked binary at hand")
	}
	_, err = Build(Options{KernelTree: t.TempDir(), Busybox: dynamic, Agent: dynamic, Out: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Fatalf("Build with %s = %v, want a refusal naming it dynamically linked", dynamic, err)
	}
}
