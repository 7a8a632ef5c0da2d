package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// benchMachines is the region size the UI must stay fast at.
const benchMachines = 10_000

// BenchmarkPages times each page as the browser fetches it (a whole HTTP round trip on
// loopback, the session lookup and the page's API calls in process, against PostgreSQL)
// with 10,000 machines in the region, and reports the 95th percentile and the page's bytes:
//
//	go test ./region/ui -run '^$' -bench Pages -benchtime 200x
func BenchmarkPages(b *testing.B) {
	e := newUIEnv(b)
	ctx := context.Background()
	by := store.Principal{User: "admin", Role: api.RoleAdmin}
	if err := e.st.Create(ctx, by, api.KindPools, &api.Pool{Name: "gold"}); err != nil {
		b.Fatal(err)
	}
	var first api.Machine
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < benchMachines; i += 4 {
				m := api.Machine{Name: fmt.Sprintf("node-%05d", i), HardwareAddrs: []string{fmt.Sprintf("52:54:00:%02x:%02x:%02x", i>>16&0xff, i>>8&0xff, i&0xff)}}
				if i%10 == 0 {
					m.Pool = "gold"
				}
				if err := e.st.Create(ctx, by, api.KindMachines, &m); err != nil {
					errs <- err
					return
				}
				if i == 0 {
					first = m
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	br := e.browser()
	br.mustSignIn(e.tokens[api.RoleAdmin])
	for _, path := range []string{"/machines", fmt.Sprintf("/machines?offset=%d", benchMachines-50), "/machines?q=Pool%3Dgold",
		"/machines/" + first.Uuid, "/events", "/racks", "/pods"} {
		b.Run(path, func(b *testing.B) {
			var times []time.Duration
			size := 0
			for b.Loop() {
				start := time.Now()
				p := br.get(path)
				times = append(times, time.Since(start))
				if p.code != http.StatusOK {
					b.Fatalf("GET %s: %d", path, p.code)
				}
				size = len(p.body)
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)*95/100].Microseconds())/1000, "p95-ms")
			b.ReportMetric(float64(size), "page-bytes")
		})
	}
}
