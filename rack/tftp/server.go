// Package tftp serves a rack's boot directory read-only over TFTP (github.com/pin/tftp/v3),
// with the blksize and tsize options.
package tftp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"

	"github.com/pin/tftp/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ironflow/ironflow/rack/bootfs"
)

// Errors sent to clients.
var (
	ErrReadOnly = errors.New("write requests are refused: this TFTP server is read-only")
	ErrBusy     = errors.New("server busy: too many transfers in progress, try again")
	// errNotServed answers a client the rack does not serve: an error packet without a
	// message (5 bytes) is smaller than any read request, so a forged source address
	// cannot make the server send its victim more than the forger sent.
	errNotServed = errors.New("")
)

// DefaultMaxTransfers bounds the transfers in progress at once (each holds a socket, a
// goroutine and an open file).
const DefaultMaxTransfers = 256

// Server is a read-only TFTP server over a boot directory.
type Server struct {
	addr      string
	dir       *bootfs.Dir
	log       *slog.Logger
	bytesSent prometheus.Counter
	transfers *prometheus.CounterVec
	slots     chan struct{} // one per transfer in progress
	serves    func(netip.Addr) bool
}

// Config is what a Server serves and where it reports.
type Config struct {
	Addr     string      // UDP address, e.g. ":69"
	Dir      *bootfs.Dir // the files served
	Registry prometheus.Registerer
	Logger   *slog.Logger // default slog.Default()
	// Serves says whether a client's address is one the rack serves; nil serves every
	// address. Others get an empty error and no file.
	Serves func(netip.Addr) bool
}

// New returns a server of cfg.Dir on cfg.Addr and registers its metrics with cfg.Registry.
func New(cfg Config) (*Server, error) {
	s := &Server{
		addr:   cfg.Addr,
		dir:    cfg.Dir,
		log:    cmp.Or(cfg.Logger, slog.Default()),
		slots:  make(chan struct{}, DefaultMaxTransfers),
		serves: cfg.Serves,
		bytesSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironflow_tftp_bytes_sent_total",
			Help: "Bytes of file data sent over TFTP.",
		}),
		transfers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironflow_tftp_requests_total",
			Help: "TFTP requests by result (ok, refused, not_found, busy, failed, not_served).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{s.bytesSent, s.transfers} {
		if err := cfg.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("tftp metrics: %w", err)
		}
	}
	return s, nil
}

// SetMaxTransfers bounds the transfers in progress at once; beyond it a read request is
// refused with ErrBusy. Call it before serving.
func (s *Server) SetMaxTransfers(n int) {
	s.slots = make(chan struct{}, max(n, 1))
}

// Serve listens on the server's UDP address until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	conn, err := net.ListenPacket("udp", s.addr)
	if err != nil {
		return fmt.Errorf("tftp listen %s: %w", s.addr, err)
	}
	return s.ServeConn(ctx, conn)
}

// ServeConn serves on an open UDP socket until ctx ends, then closes it and waits for the
// transfers in flight.
func (s *Server) ServeConn(ctx context.Context, conn net.PacketConn) error {
	srv := tftp.NewServer(s.read, s.write)
	served, shutDown := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(shutDown)
		select {
		case <-ctx.Done():
			srv.Shutdown() // closes conn, then waits for the transfers in flight
		case <-served:
		}
	}()
	s.log.Info("tftp serving", "addr", conn.LocalAddr().String(), "dir", s.dir.Root())
	err := srv.Serve(conn)
	close(served)
	<-shutDown // Serve returns before Shutdown has waited for the transfers
	if err != nil {
		conn.Close()
		return fmt.Errorf("tftp serve: %w", err)
	}
	return nil
}

func (s *Server) read(name string, rf io.ReaderFrom) error {
	peer := ""
	if ot, ok := rf.(tftp.OutgoingTransfer); ok {
		addr := ot.RemoteAddr()
		peer = addr.String()
		if s.serves != nil && !s.serves(addr.AddrPort().Addr().Unmap()) {
			s.transfers.WithLabelValues("not_served").Inc()
			s.log.Debug("tftp read refused: the client is in no served subnet", "peer", peer, "file", name)
			return errNotServed
		}
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		s.transfers.WithLabelValues("busy").Inc()
		s.log.Warn("tftp read refused: too many transfers", "peer", peer, "file", name, "max", cap(s.slots))
		return ErrBusy
	}
	f, info, err := s.dir.OpenFile(name)
	if err != nil {
		result := "refused"
		if errors.Is(err, fs.ErrNotExist) {
			result = "not_found"
		}
		s.transfers.WithLabelValues(result).Inc()
		s.log.Warn("tftp read refused", "peer", peer, "file", name, "error", err)
		return clientError(err)
	}
	defer f.Close()
	if ot, ok := rf.(tftp.OutgoingTransfer); ok {
		ot.SetSize(info.Size()) // answered only when the client asked for tsize
	}
	n, err := rf.ReadFrom(f)
	s.bytesSent.Add(float64(n))
	if err != nil {
		s.transfers.WithLabelValues("failed").Inc()
		s.log.Warn("tftp transfer failed", "peer", peer, "file", name, "sent", n, "error", err)
		return nil // ReadFrom has already sent the error to the client
	}
	s.transfers.WithLabelValues("ok").Inc()
	s.log.Debug("tftp sent", "peer", peer, "file", name, "bytes", n)
	return nil
}

// clientError is what a refused client sees: the reason without server-side paths.
func clientError(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("file not found")
	case errors.Is(err, bootfs.ErrOutside):
		return errors.New("access denied: path outside the boot directory")
	case errors.Is(err, bootfs.ErrInvalidName):
		return errors.New("access denied: invalid file name")
	case errors.Is(err, bootfs.ErrNotRegular):
		return errors.New("access denied: not a regular file")
	}
	return errors.New("access denied")
}

func (s *Server) write(name string, wt io.WriterTo) error {
	s.transfers.WithLabelValues("refused").Inc()
	s.log.Warn("tftp write refused", "file", name)
	return ErrReadOnly
}
