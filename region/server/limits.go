package server

import (
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// Limits bound what one client can hold of a region process: slow or idle connections,
// large headers, and the number of connections at once. Zero fields take the defaults.
type Limits struct {
	ReadTimeout    time.Duration // a whole request, body included (imports get importTimeout)
	WriteTimeout   time.Duration // an answer (long polls and exports extend theirs)
	IdleTimeout    time.Duration // a keep-alive connection between requests
	MaxHeaderBytes int
	MaxConns       int // connections served at once; more wait in the listen backlog
}

// DefaultLimits are the limits of a region process unless configured.
var DefaultLimits = Limits{
	ReadTimeout:    30 * time.Second,
	WriteTimeout:   60 * time.Second,
	IdleTimeout:    120 * time.Second,
	MaxHeaderBytes: 64 << 10,
	MaxConns:       1024,
}

// importTimeout is the read and write time of a migration bundle (up to maxImportBody)
// once its ticket has been verified.
const importTimeout = 10 * time.Minute

// orDefault fills the zero fields of l from DefaultLimits.
func (l Limits) orDefault() Limits {
	d := DefaultLimits
	if l.ReadTimeout > 0 {
		d.ReadTimeout = l.ReadTimeout
	}
	if l.WriteTimeout > 0 {
		d.WriteTimeout = l.WriteTimeout
	}
	if l.IdleTimeout > 0 {
		d.IdleTimeout = l.IdleTimeout
	}
	if l.MaxHeaderBytes > 0 {
		d.MaxHeaderBytes = l.MaxHeaderBytes
	}
	if l.MaxConns > 0 {
		d.MaxConns = l.MaxConns
	}
	return d
}

// apply sets the limits on srv and returns ln capped to MaxConns.
func (l Limits) apply(srv *http.Server, ln net.Listener) net.Listener {
	srv.ReadHeaderTimeout = min(10*time.Second, l.ReadTimeout)
	srv.ReadTimeout = l.ReadTimeout
	srv.WriteTimeout = l.WriteTimeout
	srv.IdleTimeout = l.IdleTimeout
	srv.MaxHeaderBytes = l.MaxHeaderBytes
	return netutil.LimitListener(ln, l.MaxConns)
}

// extendDeadlines gives the current request d from now to read its body and to answer, past
// the server-wide timeouts: for long polls and migration bundles. A read deadline that passed
// during a long poll would also cancel the request.
func extendDeadlines(w http.ResponseWriter, d time.Duration) error {
	rc := http.NewResponseController(w)
	until := time.Now().Add(d)
	if err := rc.SetReadDeadline(until); err != nil {
		return err
	}
	return rc.SetWriteDeadline(until)
}
