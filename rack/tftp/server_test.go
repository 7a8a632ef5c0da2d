package tftp

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pin/tftp/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/rack/bootfs"
)

// startServer serves dir on 127.0.0.1 and returns the address and a stop function that waits
// for transfers in flight; the server also stops with the test.
func startServer(tb testing.TB, dir string, setup ...func(*Server)) (string, *Server, func()) {
	tb.Helper()
	d, err := bootfs.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := New(Config{Addr: "127.0.0.1:0", Dir: d, Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range setup {
		f(srv)
	}
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.ServeConn(ctx, conn); err != nil {
			tb.Error(err)
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			d.Close()
		})
	}
	tb.Cleanup(stop)
	return conn.LocalAddr().String(), srv, stop
}

func randomFile(tb testing.TB, path string, size int) []byte {
	tb.Helper()
	data := make([]byte, size)
	rand.Read(data)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return data
}

// download fetches name with the pin/tftp client and returns the data and the announced tsize.
func download(tb testing.TB, addr, name string, blksize int, w io.Writer) (int64, bool, error) {
	tb.Helper()
	c, err := tftp.NewClient(addr)
	if err != nil {
		tb.Fatal(err)
	}
	if blksize != 0 {
		c.SetBlockSize(blksize)
	}
	c.RequestTSize(true)
	wt, err := c.Receive(name, "octet")
	if err != nil {
		return 0, false, err
	}
	size, ok := wt.(tftp.IncomingTransfer).Size()
	_, err = wt.WriteTo(w)
	return size, ok, err
}

func TestDownloadByteExact(t *testing.T) {
	dir := t.TempDir()
	want := randomFile(t, filepath.Join(dir, "images", "initrd.img"), 3<<20+777)
	addr, srv, stop := startServer(t, dir)
	var total int
	for _, blksize := range []int{0, 512, 1468} {
		t.Run("blksize="+blksizeName(blksize), func(t *testing.T) {
			var got bytes.Buffer
			size, ok, err := download(t, addr, "images/initrd.img", blksize, &got)
			if err != nil {
				t.Fatal(err)
			}
			if !ok || size != int64(len(want)) {
				t.Fatalf("tsize = %d (announced %v), want %d", size, ok, len(want))
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("downloaded %d bytes differ from the %d-byte file", got.Len(), len(want))
			}
			total += len(want)
		})
	}
	stop() // the server counts a transfer once the client has acknowledged the last block
	if got := counterValue(t, srv.bytesSent); got != float64(total) {
		t.Fatalf("bytes sent counter = %v, want %d", got, total)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func blksizeName(n int) string {
	if n == 0 {
		return "default"
	}
	return strconv.Itoa(n)
}

func TestRefusals(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "boot")
	randomFile(t, filepath.Join(base, "secret"), 100)
	randomFile(t, filepath.Join(dir, "ok"), 100)
	if err := os.Symlink("../secret", filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, srv, stop := startServer(t, dir)
	tests := []struct {
		name, file, wantErr string
	}{
		{"traversal", "../secret", "path outside the boot directory"},
		{"nested traversal", "sub/../../secret", "path outside the boot directory"},
		{"absolute", filepath.Join(base, "secret"), "path outside the boot directory"},
		{"symlink escape", "escape", "path outside the boot directory"},
		{"backslash", `..\secret`, "invalid file name"},
		{"directory", ".", "not a regular file"},
		{"FIFO", "fifo", "not a regular file"}, // refused at once: opening it would block
		{"missing", "nothing-here", "file not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got bytes.Buffer
			_, _, err := download(t, addr, tt.file, 1468, &got)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("download %q: err = %v, want %q", tt.file, err, tt.wantErr)
			}
			if got.Len() != 0 {
				t.Fatalf("download %q leaked %d bytes", tt.file, got.Len())
			}
		})
	}
	t.Run("write", func(t *testing.T) {
		c, err := tftp.NewClient(addr)
		if err != nil {
			t.Fatal(err)
		}
		rf, err := c.Send("ok", "octet")
		if err == nil {
			_, err = rf.ReadFrom(strings.NewReader("overwrite"))
		}
		if err == nil || !strings.Contains(err.Error(), ErrReadOnly.Error()) {
			t.Fatalf("write: err = %v, want %q", err, ErrReadOnly)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "ok")); string(got) == "overwrite" {
			t.Fatal("write request changed the file")
		}
	})
	stop()
	// Every case but "missing" is a refusal, and so is the write.
	if got := counterValue(t, srv.transfers.WithLabelValues("refused")); got != float64(len(tests)) {
		t.Fatalf("refused counter = %v, want %d", got, len(tests))
	}
}

// TestTransfersAreBounded: beyond the limit of transfers in progress a read request is
// refused at once with "busy", and served again once a slot is free.
func TestTransfersAreBounded(t *testing.T) {
	dir := t.TempDir()
	randomFile(t, filepath.Join(dir, "big"), 1<<20)
	addr, srv, _ := startServer(t, dir, func(s *Server) { s.SetMaxTransfers(1) })

	// A client that asks for a file and then stalls holds the only slot.
	stalled, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	server, _ := net.ResolveUDPAddr("udp", addr)
	if _, err := stalled.WriteTo([]byte("\x00\x01big\x00octet\x00"), server); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1024)
	stalled.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, transfer, err := stalled.ReadFrom(buf)
	if err != nil || n < 4 || buf[1] != 3 {
		t.Fatalf("first DATA of the stalled transfer: %d bytes %x, %v", n, buf[:min(n, 4)], err)
	}

	if _, _, err := download(t, addr, "big", 0, io.Discard); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("second transfer: %v, want busy", err)
	}
	if got := counterValue(t, srv.transfers.WithLabelValues("busy")); got != 1 {
		t.Fatalf("busy counter = %v, want 1", got)
	}

	// The stalled client gives up (TFTP ERROR): its slot is freed.
	if _, err := stalled.WriteTo([]byte("\x00\x05\x00\x00gone\x00"), transfer); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyOK(t, 10*time.Second, func() string {
		if _, _, err := download(t, addr, "big", 0, io.Discard); err != nil {
			return fmt.Sprintf("no transfer once the slot was free: %v", err)
		}
		return ""
	})
}

// BenchmarkDownload64MiB measures TFTP throughput of this server for a 64 MiB file with
// blksize 1468 (the usual Ethernet value), using the pin/tftp client over loopback.
func BenchmarkDownload64MiB(b *testing.B) {
	dir := b.TempDir()
	randomFile(b, filepath.Join(dir, "big.img"), 64<<20)
	addr, _, _ := startServer(b, dir)
	benchmarkDownload(b, addr, "big.img")
}

// BenchmarkExternalServer runs the same download against another TFTP server for comparison,
// e.g. tftpd-hpa: TFTP_BENCH_ADDR=127.0.0.1:16969 TFTP_BENCH_FILE=big.img.
func BenchmarkExternalServer(b *testing.B) {
	addr, file := os.Getenv("TFTP_BENCH_ADDR"), os.Getenv("TFTP_BENCH_FILE")
	if addr == "" || file == "" {
		b.Skip("TFTP_BENCH_ADDR and TFTP_BENCH_FILE not set")
	}
	benchmarkDownload(b, addr, file)
}

func benchmarkDownload(b *testing.B, addr, file string) {
	var n int64
	for b.Loop() {
		cw := &countingWriter{}
		if _, _, err := download(b, addr, file, 1468, cw); err != nil {
			b.Fatal(err)
		}
		n = cw.n
	}
	b.SetBytes(n)
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// TestClientsNotServedGetNoFile: a read request from an address the rack does not serve is
// answered with an empty error, smaller than the request, so a forged source cannot turn the
// server against it.
func TestClientsNotServedGetNoFile(t *testing.T) {
	dir := t.TempDir()
	randomFile(t, filepath.Join(dir, "ipxe.efi"), 4096)
	addr, _, _ := startServer(t, dir, func(s *Server) { s.serves = func(netip.Addr) bool { return false } })
	// Not connected: the answer comes from the transfer's own port.
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	dst, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	request := []byte("\x00\x01ipxe.efi\x00octet\x00blksize\x001468\x00")
	if _, err := pc.WriteTo(request, dst); err != nil {
		t.Fatal(err)
	}
	reply := make([]byte, 2048)
	if err := pc.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, _, err := pc.ReadFrom(reply)
	if err != nil {
		t.Fatal(err)
	}
	if n > len(request) || n < 4 || reply[1] != 5 {
		t.Fatalf("answer to a client not served: %d bytes %q, want an error packet of at most %d", n, reply[:n], len(request))
	}
}
