package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/rack"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/region/server"
)

// imageStack is a real region (PostgreSQL, HTTP API, images dir) and a real rack serving
// HTTP boot on loopback, registered with it.
type imageStack struct {
	admin   *client.Client
	rackURL string // the rack's HTTP boot
}

func startImageStack(t testing.TB) *imageStack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, token := startRegionStore(t, "images", "images-admin-token")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := server.New(st, server.Config{Name: "region-i", PublicURL: url, RackSecret: "images-rack-secret", Version: "test", Logger: quiet, ImagesDir: t.TempDir()})
	serveCtx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("region: %v", err)
		}
	})
	s := &imageStack{admin: client.New(url, token)}
	stateDir := t.TempDir()
	reg, err := rack.Register(ctx, rack.RegisterOptions{URLs: []string{url}, Secret: "images-rack-secret", Name: "rack-i", StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	o := rack.Options{
		StateDir:            stateDir,
		DHCPRelayListen:     testutil.FreeUDPAddr(t),
		ServerIP:            netip.MustParseAddr("127.0.0.1"),
		DNSListen:           []string{},
		HTTPListen:          testutil.FreeAddr(t),
		BootDir:             t.TempDir(),
		PodRefreshInterval:  -1,
		PowerPollInterval:   -1,
		HeartbeatInterval:   200 * time.Millisecond,
		RegionCheckInterval: 200 * time.Millisecond,
		ImageCacheBytes:     256 << 20,
		Version:             "test",
		Logger:              quiet,
	}
	s.rackURL = "http://" + o.HTTPListen
	rackCtx, stopRack := context.WithCancel(context.Background())
	rackDone := make(chan error, 1)
	go func() { rackDone <- rack.Serve(rackCtx, o) }()
	t.Cleanup(func() {
		stopRack()
		if err := <-rackDone; err != nil {
			t.Errorf("rack: %v", err)
		}
	})
	// Online on the region, and its HTTP boot listening: it opens once its first config came.
	testutil.Eventually(t, 20*time.Second, "the rack online and its HTTP boot answering", func() bool {
		rk, err := s.admin.Racks().Get(context.Background(), reg.Uuid)
		if err != nil || rk.Status != api.RackOnline {
			return false
		}
		resp, err := http.Get(s.rackURL + "/metrics")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	return s
}

// upload stores size random bytes as the image name and returns them.
func (s *imageStack) upload(t testing.TB, name string, size int) []byte {
	t.Helper()
	data := make([]byte, size)
	rand.Read(data)
	sum := sha256.Sum256(data)
	img, err := s.admin.UploadImage(context.Background(), client.ImageUpload{Name: name, SHA256: hex.EncodeToString(sum[:])}, bytes.NewReader(data), int64(size))
	if err != nil {
		t.Fatal(err)
	}
	if img.Size != int64(size) {
		t.Fatalf("uploaded %+v", img)
	}
	return data
}

// rackGet fetches path from the rack's HTTP boot, with a Range header when rng is not "".
func rackGet(t testing.TB, url, rng string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// An image uploaded to the region reaches a machine through its rack: the rack fetches it on
// first use with its own token and serves any byte range of it over HTTP boot; an image the
// region lacks is 404 there.
func TestImageServedByRangeThroughTheRack(t *testing.T) {
	s := startImageStack(t)
	data := s.upload(t, "test-image", 3<<20)
	code, body := rackGet(t, s.rackURL+api.RackImagePath+"test-image", "bytes=1048576-1049599")
	if code != http.StatusPartialContent || !bytes.Equal(body, data[1<<20:1<<20+1024]) {
		t.Fatalf("ranged GET from the rack: %d, %d bytes (want 206 and the range's 1024)", code, len(body))
	}
	code, body = rackGet(t, s.rackURL+api.RackImagePath+"test-image", "")
	if code != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("whole GET from the rack: %d, %d bytes", code, len(body))
	}
	if code, _ := rackGet(t, s.rackURL+api.RackImagePath+"missing", ""); code != http.StatusNotFound {
		t.Errorf("an image the region lacks: %d, want 404", code)
	}
}

// BenchmarkRackImageServing measures the rack's HTTP boot serving a cached image to 1 and to
// 50 clients at once on loopback; MB/s is the bytes all clients received per second.
func BenchmarkRackImageServing(b *testing.B) {
	s := startImageStack(b)
	const size = 64 << 20
	s.upload(b, "bench-image", size)
	url := s.rackURL + api.RackImagePath + "bench-image"
	if code, _ := rackGet(b, url, "bytes=0-0"); code != http.StatusPartialContent { // fetched into the cache
		b.Fatalf("warm-up GET: %d", code)
	}
	for _, clients := range []int{1, 50} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			tr := &http.Transport{MaxIdleConnsPerHost: clients}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			b.SetBytes(int64(size * clients))
			for b.Loop() {
				var wg sync.WaitGroup
				errs := make(chan error, clients)
				for range clients {
					wg.Go(func() {
						resp, err := hc.Get(url)
						if err != nil {
							errs <- err
							return
						}
						defer resp.Body.Close()
						if n, err := io.Copy(io.Discard, resp.Body); err != nil || n != size {
							errs <- fmt.Errorf("%d bytes, %v", n, err)
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
			}
		})
	}
}
