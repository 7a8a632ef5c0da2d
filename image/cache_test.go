package image

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestPruneImagesKeepsTheNewest: the cache of built images keeps the most recently built or
// used ones and removes the others.
func TestPruneImagesKeepsTheNewest(t *testing.T) {
	dir := t.TempDir()
	base := time.Now().Add(-time.Hour)
	for i := range 6 {
		p := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		at := base.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := pruneImages(dir, 4); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"2", "3", "4", "5"}; !slices.Equal(left, want) {
		t.Fatalf("cache keeps %v, want the newest %v", left, want)
	}
}
