package ratelimit

import (
	"testing"
	"time"
)

// Each key gets its burst, then a token per 1/rate; a refusal says when the next one comes
// and spends nothing.
func TestKeyedBucketsAreIndependent(t *testing.T) {
	k := NewKeyed[string](2, 3, 10)
	now := time.Unix(1000, 0)
	for i := range 3 {
		if ok, _ := k.Take("a", now); !ok {
			t.Fatalf("take %d of a's burst refused", i)
		}
	}
	ok, retry := k.Take("a", now)
	if ok || retry != 500*time.Millisecond {
		t.Fatalf("past the burst: ok %v, retry after %v; want refused, 500ms", ok, retry)
	}
	if ok, _ := k.Take("b", now); !ok {
		t.Fatal("b refused while a is spent")
	}
	if ok, _ := k.Take("a", now.Add(500*time.Millisecond)); !ok {
		t.Fatal("a refused once a token refilled")
	}
}

// A full table refuses new keys until its buckets have refilled, then forgets them.
func TestKeyedTableIsBounded(t *testing.T) {
	k := NewKeyed[int](1, 2, 3)
	now := time.Unix(1000, 0)
	for key := range 3 {
		k.Take(key, now)
	}
	if ok, retry := k.Take(3, now); ok || retry != 2*time.Second {
		t.Fatalf("a fourth key: ok %v, retry after %v; want refused, 2s (a bucket's refill)", ok, retry)
	}
	if ok, _ := k.Take(3, now.Add(3*time.Second)); !ok || len(k.buckets) != 1 {
		t.Fatalf("after the buckets refilled: ok %v, %d buckets; want the new key alone", ok, len(k.buckets))
	}
}
