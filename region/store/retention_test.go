package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// TestPruneEvents: events past the age bound go, then all but the newest count.
func TestPruneEvents(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	for i := range 6 {
		mustCreate(t, s, api.KindPools, &api.Pool{Name: fmt.Sprintf("p%d", i)})
	}
	// The two oldest events are two days old.
	if _, err := s.DB().Exec(ctx, "UPDATE events SET time = now() - interval '2 days' WHERE id IN (SELECT id FROM events ORDER BY id LIMIT 2)"); err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		events, err := s.Events(ctx, store.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range events {
			out = append(out, e.Key)
		}
		return out
	}
	if n, err := s.PruneEvents(ctx, 0, 0); err != nil || n != 0 {
		t.Fatalf("no bounds: deleted %d, %v", n, err)
	}
	if n, err := s.PruneEvents(ctx, 24*time.Hour, 0); err != nil || n != 2 {
		t.Fatalf("age bound: deleted %d, %v; want 2", n, err)
	}
	if n, err := s.PruneEvents(ctx, 24*time.Hour, 3); err != nil || n != 1 {
		t.Fatalf("count bound: deleted %d, %v; want 1", n, err)
	}
	if got := fmt.Sprint(keys()); got != "[p5 p4 p3]" {
		t.Fatalf("events left %s, want the newest three", got)
	}
}
