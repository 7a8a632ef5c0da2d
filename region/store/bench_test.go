package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

func benchStore(b *testing.B) *store.Store {
	b.Helper()
	s, err := store.Open(context.Background(), pgtest.NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	return s
}

// BenchmarkCreateMachine: validation, insert, MAC and profile rows and the audit event; with
// an Address, also the check that no other machine holds it.
func BenchmarkCreateMachine(b *testing.B) {
	for _, addressed := range []bool{false, true} {
		b.Run(fmt.Sprintf("address=%v", addressed), func(b *testing.B) {
			s := benchStore(b)
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				m := &api.Machine{Name: fmt.Sprintf("m%d", i), Pool: "default",
					HardwareAddrs: []string{fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", byte(i>>24), byte(i>>16), byte(i>>8), byte(i))}}
				if addressed {
					m.Address = fmt.Sprintf("10.%d.%d.%d", byte(i>>16), byte(i>>8), byte(i))
				}
				if err := s.Create(ctx, alice, api.KindMachines, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGetMachineByMAC looks machines up the way DHCP and the agent do, among 1000.
func BenchmarkGetMachineByMAC(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	const n = 1000
	for i := range n {
		m := &api.Machine{Name: fmt.Sprintf("m%d", i), HardwareAddrs: []string{fmt.Sprintf("52:54:00:00:%02x:%02x", byte(i>>8), byte(i))}}
		if err := s.Create(ctx, alice, api.KindMachines, m); err != nil {
			b.Fatal(err)
		}
	}
	var m api.Machine
	for i := 0; b.Loop(); i++ {
		if err := s.Get(ctx, api.KindMachines, fmt.Sprintf("HardwareAddrs:52:54:00:00:%02x:%02x", byte(i%n>>8), byte(i%n)), &m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMovedSyslog: the syslog part of a move at its bound, api.MaxMovedSyslog messages
// of 200 bytes: the export's read, and the import's insert with the undo that deletes them.
func BenchmarkMovedSyslog(b *testing.B) {
	ctx := context.Background()
	src, dst := benchStore(b), benchStore(b)
	m := &api.Machine{Name: "moving", HardwareAddrs: []string{"52:54:00:00:05:01"}}
	if err := src.Create(ctx, alice, api.KindMachines, m); err != nil {
		b.Fatal(err)
	}
	if _, err := src.DB().Exec(ctx, `INSERT INTO syslog (machine, received, doc)
		SELECT $1, now(), jsonb_build_object('Addr', '10.0.0.7', 'MAC', '52:54:00:00:05:01', 'Received', now(), 'Facility', 1, 'Severity', 6,
			'Text', repeat('x', 200))
		FROM generate_series(1, $2::int) n`, m.Uuid, api.MaxMovedSyslog); err != nil {
		b.Fatal(err)
	}
	bundle, err := src.Export(ctx, m.Uuid)
	if err != nil || len(bundle.Syslog) != api.MaxMovedSyslog {
		b.Fatalf("export: %d messages, %v", len(bundle.Syslog), err)
	}
	b.Run("export", func(b *testing.B) {
		for b.Loop() {
			if _, err := src.Export(ctx, m.Uuid); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("import+undo", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			ticket := store.TicketUse{ID: fmt.Sprintf("t%d", i), Expires: time.Now().Add(time.Hour), Migration: "bench"}
			if _, err := dst.Import(ctx, ticket, bundle, "https://drp2:8092"); err != nil {
				b.Fatal(err)
			}
			if err := dst.Delete(store.ForMigration(ctx, "bench"), alice, api.KindMachines, m.Uuid, false); err != nil {
				b.Fatal(err)
			}
		}
		// Each undo removed what its import stored, so each import stored every message.
		var left int
		if err := dst.DB().QueryRow(ctx, "SELECT count(*) FROM syslog").Scan(&left); err != nil || left != 0 {
			b.Fatalf("%d messages left after the undos (%v)", left, err)
		}
	})
}
