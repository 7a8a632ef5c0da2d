package backoff

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func waits(b *Backoff, n int) []time.Duration {
	var out []time.Duration
	for range n {
		out = append(out, b.Next())
	}
	return out
}

func TestNextDoublesUpToMax(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    Backoff
		want []time.Duration
	}{
		{"doubles then caps", Backoff{Initial: time.Second, Max: 5 * time.Second},
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}},
		{"exact power of two cap", Backoff{Initial: 250 * time.Millisecond, Max: time.Second},
			[]time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, time.Second}},
		{"initial above max starts at max", Backoff{Initial: time.Minute, Max: time.Second},
			[]time.Duration{time.Second, time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := waits(&tc.b, len(tc.want)); !slices.Equal(got, tc.want) {
				t.Fatalf("waits = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestResetStartsAgain(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: time.Minute}
	waits(&b, 4)
	b.Reset()
	if got := b.Next(); got != time.Second {
		t.Fatalf("first wait after Reset = %v, want 1s", got)
	}
}

func TestJitterStaysInUpperHalf(t *testing.T) {
	for _, tc := range []struct {
		name string
		rand func(n time.Duration) time.Duration
		want []time.Duration
	}{
		{"lowest draw waits half", func(time.Duration) time.Duration { return 0 },
			[]time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}},
		{"highest draw waits the whole delay", func(n time.Duration) time.Duration { return n - 1 },
			[]time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Backoff{Initial: 100 * time.Millisecond, Max: 400 * time.Millisecond, Jitter: true, Rand: tc.rand}
			if got := waits(&b, len(tc.want)); !slices.Equal(got, tc.want) {
				t.Fatalf("waits = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestJitterDefaultRandomSource(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: time.Second, Jitter: true}
	for range 100 {
		if d := b.Next(); d < 500*time.Millisecond || d > time.Second {
			t.Fatalf("jittered wait %v outside [500ms, 1s]", d)
		}
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}
}
