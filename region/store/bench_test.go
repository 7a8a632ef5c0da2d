package store_test

import (
	"context"
	"fmt"
	"testing"

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
