package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// peakRSS is the process's peak resident set since the last resetPeakRSS, in bytes.
func peakRSS(b *testing.B) float64 {
	b.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status:", err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb * 1024
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}

func resetPeakRSS(b *testing.B) {
	b.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skip("cannot reset the peak RSS:", err)
	}
}

// postDiscarding posts body as role (or asMove) and discards the answer, so that only the
// region's side of the request weighs on the process's memory; it returns the status.
func postDiscarding(b *testing.B, e *env, role, path string, body []byte) int {
	b.Helper()
	token := e.tokens[role]
	if role == asMove {
		token = e.tokens[api.RoleAdmin]
	}
	req := newRequest(b, token, http.MethodPost, e.base+path, body)
	if role == asMove {
		req.Header.Set(api.HeaderMove, "1")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		b.Fatal(err)
	}
	return resp.StatusCode
}

// BenchmarkOversizedRelease posts a 48 MB release of a paused rack's queue (800 operations)
// to a region served in this process, as an operator and as the move, and reports the
// process's peak RSS above what it was before each post (the region's cost of the request).
func BenchmarkOversizedRelease(b *testing.B) {
	e := newEnv(b)
	rack, _ := e.rackNetwork()
	e.mustDo(api.RoleOperator, http.MethodPost, "/api/v1/racks/"+rack+"/pause", nil, http.StatusOK)
	rel := api.OperationsRelease{Origin: "region-x"}
	for i := range 800 {
		rel.Operations = append(rel.Operations, api.PendingOperation{ID: int64(i), Target: rack, Kind: "power-on",
			Payload: map[string]any{"Body": strings.Repeat("x", 60_000)}})
	}
	body, err := json.Marshal(rel)
	if err != nil {
		b.Fatal(err)
	}
	for _, who := range []string{api.RoleOperator, asMove} {
		b.Run(who, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				resetPeakRSS(b)
				before := peakRSS(b)
				b.StartTimer()
				code := postDiscarding(b, e, who, "/api/v1/racks/"+rack+"/operations/release", body)
				b.StopTimer()
				b.ReportMetric((peakRSS(b)-before)/(1<<20), "peak-RSS-MiB/op")
				b.ReportMetric(float64(code), "status")
				b.StartTimer()
			}
		})
	}
}
