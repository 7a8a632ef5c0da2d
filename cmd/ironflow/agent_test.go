package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

const agentMachine = "01d8828f-2f7d-4a1c-a1fa-f668274c7c44"

func writeAgentConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAgentCommandRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    func(t *testing.T) []string
		env     string
		wantErr string
	}{
		{"missing file", func(t *testing.T) []string {
			return []string{"agent", "--config", filepath.Join(t.TempDir(), "nope.yaml")}
		}, "", "no such file"},
		{"not a UUID", func(t *testing.T) []string {
			return []string{"agent", "--config", writeAgentConfig(t, "endpoints: [http://127.0.0.1:1]\nmachine: birdy\nsecret: s\n")}
		}, "", "not a UUID"},
		{"unknown key", func(t *testing.T) []string {
			return []string{"agent", "--config", writeAgentConfig(t, "endpoint: http://127.0.0.1:1\n")}
		}, "", "unknown field"},
		{"config from the environment", func(t *testing.T) []string { return []string{"agent"} },
			"/nonexistent/agent.yaml", "/nonexistent/agent.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("IRONFLOW_AGENT_CONFIG", tt.env)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args(t), strings.NewReader(""), &stdout, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr.String(), tt.wantErr)
			}
		})
	}
}

// The agent checks in with its endpoint using the machine's credentials, and stops cleanly
// when interrupted.
func TestAgentCommandChecksInAndStops(t *testing.T) {
	checkins := make(chan api.AgentCheckin, 1)
	auth := make(chan string, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/agent/{uuid}/checkin", func(w http.ResponseWriter, r *http.Request) {
		var c api.AgentCheckin
		json.NewDecoder(r.Body).Decode(&c)
		select {
		case checkins <- c:
			auth <- r.Header.Get("Authorization")
		default:
		}
		json.NewEncoder(w).Encode(api.AgentConfig{Machine: r.PathValue("uuid"), PollWait: "1s"})
	})
	mux.HandleFunc("GET /api/v1/agent/{uuid}/next-job", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	path := writeAgentConfig(t, "endpoints: ["+srv.URL+"]\nmachine: "+agentMachine+"\nsecret: h5kYqfCu6ehiAVz0\n")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"agent", "--config", path}, strings.NewReader(""), &bytes.Buffer{}, &stderr)
	}()
	select {
	case c := <-checkins:
		if c.Endpoint != srv.URL || c.Version != version {
			t.Errorf("check-in %+v", c)
		}
		if got := <-auth; got != "Bearer machine:"+agentMachine+":h5kYqfCu6ehiAVz0" {
			t.Errorf("Authorization %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not check in")
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not stop when interrupted")
	}
}
