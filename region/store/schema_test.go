package store_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

func TestReopenKeepsDataAndAppliesMigrationsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, url := newStore(t)
	mustCreate(t, s, api.KindMachines, &api.Machine{Uuid: mach1, Name: "m1"})
	s.Close()

	// Several region processes start together on the same (already migrated) database.
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() {
			s, err := store.Open(ctx, url)
			if err == nil {
				s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent store.Open: %v", err)
		}
	}

	s2, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var m api.Machine
	if err := s2.Get(ctx, api.KindMachines, "Name:m1", &m); err != nil || m.Uuid != mach1 {
		t.Fatalf("after reopen: %+v, %v", m, err)
	}
	count, latest, err := store.LatestMigration()
	if err != nil {
		t.Fatal(err)
	}
	var n, maxVersion int
	if err := s2.DB().QueryRow(ctx, "SELECT count(*), max(version) FROM schema_migrations").Scan(&n, &maxVersion); err != nil {
		t.Fatal(err)
	}
	if n != count || maxVersion != latest {
		t.Fatalf("schema_migrations has %d rows up to %d, want %d up to %d", n, maxVersion, count, latest)
	}
	var pools int
	if err := s2.DB().QueryRow(ctx, "SELECT count(*) FROM pools WHERE name = 'default'").Scan(&pools); err != nil || pools != 1 {
		t.Fatalf("default pool rows %d (%v)", pools, err)
	}
}

func TestConcurrentFirstOpen(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() {
			s, err := store.Open(context.Background(), url)
			if err == nil {
				s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent first store.Open: %v", err)
		}
	}
}

func TestChangedMigrationIsRefused(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	if _, err := s.DB().Exec(context.Background(), "UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1"); err != nil {
		t.Fatal(err)
	}
	_, err := store.Open(context.Background(), url)
	if err == nil || !strings.Contains(err.Error(), "0001_core.sql was changed after it was applied") {
		t.Fatalf("store.Open with an edited migration: %v", err)
	}
}

func TestUnreachableDatabase(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	closed := closedPort(t)
	_, err := store.Open(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable&connect_timeout=2", closed))
	wantErr(t, err, store.ErrUnavailable, fmt.Sprintf("127.0.0.1:%d", closed))
	_, err = store.Open(ctx, "postgres://%zz")
	wantErr(t, err, store.ErrInvalid, "database URL")

	// The store reaches PostgreSQL through a proxy; taking the proxy down cuts the store off
	// (open connections die, new ones are refused), bringing it back lets pgxpool reconnect.
	u, err := url.Parse(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, "127.0.0.1:0", u.Host)
	u.Host = p.addr
	s, err := store.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustCreate(t, s, api.KindPools, &api.Pool{Name: "gold"})
	p.stop()
	wantErr(t, s.Ping(ctx), store.ErrUnavailable, "database unavailable")
	wantErr(t, s.Get(ctx, api.KindPools, "gold", &api.Pool{}), store.ErrUnavailable, "database unavailable")
	wantErr(t, s.Create(ctx, alice, api.KindPools, &api.Pool{Name: "silver"}), store.ErrUnavailable, "database unavailable")
	_, err = s.Authenticate(ctx, "x")
	wantErr(t, err, store.ErrUnavailable, "database unavailable")
	_, err = s.Events(ctx, store.ListOptions{})
	wantErr(t, err, store.ErrUnavailable, "database unavailable")

	startProxy(t, p.addr, p.target)
	var pool api.Pool
	if err := s.Get(ctx, api.KindPools, "gold", &pool); err != nil {
		t.Fatalf("after the database came back: %v", err)
	}
}

// proxy forwards TCP connections from addr to target until stopped.
type proxy struct {
	addr, target string
	ln           net.Listener
	mu           sync.Mutex
	conns        []net.Conn
	stopped      bool
	wg           sync.WaitGroup
}

func startProxy(t *testing.T, addr, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String(), target: target, ln: ln}
	p.wg.Go(p.accept)
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Go(func() { io.Copy(up, c); up.Close() })
		p.wg.Go(func() { io.Copy(c, up); c.Close() })
	}
}

// stop closes the listener and every forwarded connection.
func (p *proxy) stop() {
	p.ln.Close()
	p.mu.Lock()
	p.stopped = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// closedPort returns a loopback port with no listener.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}
