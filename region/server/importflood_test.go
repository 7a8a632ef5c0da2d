package server_test

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// endlessBody is a request body of n bytes of JSON-ish filler that counts what was read of it.
type endlessBody struct {
	left int64
	read *atomic.Int64
}

func (b *endlessBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), b.left))
	for i := range p[:n] {
		p[i] = ' '
	}
	b.left -= int64(n)
	b.read.Add(int64(n))
	return n, nil
}

// TestImportRefusesBadTicketBeforeReadingBody: four concurrent imports of 250 MiB with a bad
// ticket are answered 401 without the region reading their bodies.
func TestImportRefusesBadTicketBeforeReadingBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const size = 250 << 20
	var read atomic.Int64
	var wg sync.WaitGroup
	codes := make([]int, 4)
	start := time.Now()
	for i := range codes {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodPost, e.base+"/api/v1/machines/import", &endlessBody{left: size, read: &read})
			if err != nil {
				t.Error(err)
				return
			}
			req.ContentLength = size
			req.Header.Set(api.TicketHeader, "x")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("import %d: %v", i, err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for i, code := range codes {
		if code != http.StatusUnauthorized {
			t.Errorf("import %d: status %d, want 401", i, code)
		}
	}
	// The client writes until the region closes the connection: socket buffers, not bodies.
	if n := read.Load(); n > 4*(16<<20) {
		t.Errorf("the client sent %d MiB of the 4 x 250 MiB bodies before the answers", n>>20)
	}
	t.Logf("4 refused imports of 250 MiB: %s, %d KiB of body sent", elapsed, read.Load()>>10)
}
