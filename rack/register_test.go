package rack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// registrar is a stand-in region's registration endpoint: it accepts its rack secret and the
// last token it issued, and records the bearer of every attempt.
type registrar struct {
	name, secret string

	mu      sync.Mutex
	issued  int
	token   string
	bearers []string
}

func (r *registrar) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	bearer := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
	r.bearers = append(r.bearers, bearer)
	var reg api.RackRegistration
	if err := json.NewDecoder(req.Body).Decode(&reg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if bearer != r.secret && (r.token == "" || bearer != r.token) {
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(api.Error{Error: "unknown credential", Code: 401})
		return
	}
	r.issued++
	r.token = fmt.Sprintf("%s-token-%d", r.name, r.issued)
	json.NewEncoder(w).Encode(api.RackRegistered{Rack: api.Rack{Uuid: thisRack, Name: reg.Name}, Token: r.token, Region: api.Info{Name: r.name}})
}

// seen returns the bearers since the last call.
func (r *registrar) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.bearers
	r.bearers = nil
	return b
}

func (r *registrar) revoke() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.token = ""
}

// TestReRegistrationUsesTheRacksOwnToken: a registered rack proves itself with its own token
// to its region (which lets the shared secret claim a rack only once), never shows that token
// to another region, and falls back to the secret where the token is unknown.
func TestReRegistrationUsesTheRacksOwnToken(t *testing.T) {
	a := &registrar{name: "region-a", secret: "secret-a"}
	b := &registrar{name: "region-b", secret: "secret-b"}
	srvA, srvB := httptest.NewServer(a), httptest.NewServer(b)
	defer srvA.Close()
	defer srvB.Close()
	ctx := context.Background()
	dir := t.TempDir()
	register := func(url, secret string) State {
		t.Helper()
		st, err := Register(ctx, RegisterOptions{URLs: []string{url}, Secret: secret, Name: "rack-1", StateDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	expect := func(r *registrar, want ...string) {
		t.Helper()
		if got := r.seen(); !slices.Equal(got, want) {
			t.Fatalf("%s saw bearers %q, want %q", r.name, got, want)
		}
	}

	first := register(srvA.URL, "secret-a")
	expect(a, "secret-a")
	second := register(srvA.URL, "secret-a")
	expect(a, first.Token) // its own token, not the shared secret
	if second.Uuid != first.Uuid || second.Token == first.Token {
		t.Fatalf("registered again as %+v (first %+v)", second, first)
	}
	third := register(srvA.URL, "") // the stored token is enough
	expect(a, second.Token)

	a.revoke() // e.g. the region handed the rack over: the secret claims it afresh
	register(srvA.URL, "secret-a")
	expect(a, third.Token, "secret-a")

	register(srvB.URL, "secret-b")
	expect(b, "secret-b") // region A's token is not shown to region B
}
