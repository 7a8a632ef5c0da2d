package dev

import (
	"context"
	"fmt"
	"net"
	"strings"
)

// serving is one run of a region's HTTP server.
type serving struct {
	cancel context.CancelFunc
	done   chan error
}

func (r *Region) serve(ctx context.Context, ln net.Listener) {
	ctx, cancel := context.WithCancel(ctx)
	sv := &serving{cancel: cancel, done: make(chan error, 1)}
	go func() { sv.done <- r.srv.Serve(ctx, ln) }()
	r.serving = sv
}

// StopRegion stops a region's HTTP API as if its process died; its database stays. Tests use
// it to take a region away in the middle of an operation.
func (s *Stack) StopRegion(name string) error {
	r := s.Regions[name]
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.serving == nil {
		return nil
	}
	r.serving.cancel()
	err := <-r.serving.done
	r.serving = nil
	return err
}

// StartRegion serves a stopped region again at the same URL.
func (s *Stack) StartRegion(name string) error {
	r := s.Regions[name]
	if r == nil {
		return fmt.Errorf("no region %s", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.serving != nil {
		return nil
	}
	ln, err := net.Listen("tcp", strings.TrimPrefix(r.URL, "http://"))
	if err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	r.serve(s.runCtx, ln)
	return nil
}
