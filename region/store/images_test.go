package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

const testSHA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func createImage(t *testing.T, s *store.Store, name, sha string) {
	t.Helper()
	img := api.Image{Name: name, Arch: "amd64", Format: "raw", Compression: "none", SHA256: sha, Size: 10}
	if _, _, err := s.CreateImage(context.Background(), alice, img, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// A machine deployed with an image moves only to a region holding that image under its name
// with the same SHA-256: the import and a rack transfer's check name what the target lacks
// before anything is stored there.
func TestMoveRefusedToARegionWithoutTheMachinesImage(t *testing.T) {
	ctx := context.Background()
	dst := newRegion(t)
	m := api.Machine{Uuid: "bbbbbbbb-0000-4000-8000-0000000000aa", Name: "deployed-1", Image: &api.ImageRef{Name: "debian-12", SHA256: testSHA}}
	m.Normalize()
	createImage(t, dst.s, "debian-12", strings.Repeat("f", 64)) // the name, with other bytes

	_, err := dst.s.Import(ctx, ticketUse("image-ticket"), api.Bundle{Machine: m}, "http://source.example")
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "deployed-1 is deployed with image debian-12 (SHA-256 "+testSHA+"), which this region lacks") {
		t.Fatalf("import without the image: %v", err)
	}
	var stored api.Machine
	if err := dst.s.Get(ctx, api.KindMachines, m.Uuid, &stored); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused import stored the machine: %v", err)
	}
	b := api.RackBundle{Rack: api.Rack{Uuid: rackA, Name: "rack-a"}, Machines: []api.RackMachine{{Uuid: m.Uuid, Name: m.Name, HardwareAddrs: []string{}, Image: m.Image}}}
	c, err := dst.s.CheckRackImport(ctx, b)
	if err != nil || len(c.Conflicts) != 1 || !strings.Contains(c.Conflicts[0], "image debian-12") {
		t.Fatalf("rack import check without the image: %+v, %v", c, err)
	}

	createImage(t, dst.s, "debian-12-copy", testSHA) // the bytes, under another name: still not it
	if c, err := dst.s.CheckRackImport(ctx, b); err != nil || len(c.Conflicts) != 1 {
		t.Fatalf("the bytes under another name: %+v, %v", c, err)
	}
	if err := dst.s.DeleteImage(ctx, alice, "debian-12", func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	createImage(t, dst.s, "debian-12", testSHA)
	if c, err := dst.s.CheckRackImport(ctx, b); err != nil || len(c.Conflicts) != 0 {
		t.Fatalf("rack import check with the image: %+v, %v", c, err)
	}
	if _, err := dst.s.Import(ctx, ticketUse("image-ticket-2"), api.Bundle{Machine: m}, "http://source.example"); err != nil {
		t.Fatalf("import with the image: %v", err)
	}
}

// Removing a file shared by two names waits for the last name; the remove runs under the
// hash's lock, inside the delete.
func TestDeleteImageRemovesTheFileWithTheLastName(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	createImage(t, s, "a", testSHA)
	createImage(t, s, "b", testSHA)
	var removed []string
	remove := func(sha string) error { removed = append(removed, sha); return nil }
	if err := s.DeleteImage(ctx, alice, "a", remove); err != nil || len(removed) != 0 {
		t.Fatalf("delete of one of two names: removed %v, %v", removed, err)
	}
	if err := s.DeleteImage(ctx, alice, "b", remove); err != nil || len(removed) != 1 || removed[0] != testSHA {
		t.Fatalf("delete of the last name: removed %v, %v", removed, err)
	}
	// A failed removal keeps the row: the image is not reported gone while its file is there.
	createImage(t, s, "c", testSHA)
	if err := s.DeleteImage(ctx, alice, "c", func(string) error { return errors.New("disk gone") }); err == nil {
		t.Fatal("delete with a failed removal succeeded")
	}
	if _, err := s.Image(ctx, "c"); err != nil {
		t.Errorf("image after a failed removal: %v", err)
	}
}
