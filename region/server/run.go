package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/ironflow/ironflow/internal/backoff"
	"github.com/ironflow/ironflow/region/store"
)

// Delays between attempts to open the store while PostgreSQL is not up yet.
const (
	openRetryFirst = 250 * time.Millisecond
	openRetryMax   = 5 * time.Second
)

// Run is a whole region process: it opens the store (waiting for PostgreSQL), bootstraps the
// admin token, records the region identity and serves the API on cfg.Listen until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.DatabaseURL == "" {
		return errors.New("region: no database URL")
	}
	if cfg.AdminToken == "" && cfg.AdminTokenOut == nil {
		return errors.New("region: no admin token and no way to show a minted one")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Listen == "" {
		cfg.Listen = ":5240"
	}
	if cfg.Name == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("region name: %w", err)
		}
		cfg.Name = host
	}
	log := cfg.Logger

	st, err := openStore(ctx, cfg.DatabaseURL, log)
	if err != nil {
		return err
	}
	defer st.Close()

	if err := bootstrapAdmin(ctx, st, cfg, log); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("region API listen: %w", err)
	}
	if cfg.PublicURL == "" {
		cfg.PublicURL = defaultPublicURL(ln.Addr().(*net.TCPAddr))
		log.Warn("no public URL configured; guessing one, which racks and clients must be able to reach", "url", cfg.PublicURL)
	}
	s := New(st, cfg)
	if s.blobsErr != nil {
		ln.Close()
		return fmt.Errorf("region images: %w", s.blobsErr)
	}
	id, err := s.identity(ctx)
	if err != nil {
		ln.Close()
		return fmt.Errorf("region identity: %w", err)
	}
	log.Info("region serving", "name", cfg.Name, "uuid", id, "listen", ln.Addr().String(), "url", cfg.PublicURL, "version", cfg.Version)
	return s.Serve(ctx, ln)
}

// defaultPublicURL is the URL of addr, with the host name in place of a wildcard address.
func defaultPublicURL(addr *net.TCPAddr) string {
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		if name, err := os.Hostname(); err == nil {
			host = name
		}
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(addr.Port))
}

// openStore opens the store, retrying with backoff while PostgreSQL cannot be reached.
func openStore(ctx context.Context, databaseURL string, log *slog.Logger) (*store.Store, error) {
	wait := backoff.Backoff{Initial: openRetryFirst, Max: openRetryMax}
	for attempt := 1; ; attempt++ {
		st, err := store.Open(ctx, databaseURL)
		if err == nil {
			if attempt > 1 {
				log.Info("database reachable", "attempt", attempt)
			}
			return st, nil
		}
		if !errors.Is(err, store.ErrUnavailable) {
			return nil, fmt.Errorf("open store: %w", err)
		}
		delay := wait.Next()
		log.Warn("database not reachable yet, retrying", "attempt", attempt, "retry_in", delay, "error", err)
		if backoff.Sleep(ctx, delay) != nil {
			return nil, fmt.Errorf("open store: gave up after %d attempts: %w", attempt, err)
		}
	}
}

// bootstrapAdmin makes sure an admin token exists. A token minted here goes once to
// cfg.AdminTokenOut; a token given in the configuration is never shown or logged.
func bootstrapAdmin(ctx context.Context, st *store.Store, cfg Config, log *slog.Logger) error {
	minted, created, err := st.BootstrapAdmin(ctx, cfg.AdminToken)
	if err != nil {
		return fmt.Errorf("bootstrap admin token: %w", err)
	}
	switch {
	case created && cfg.AdminToken == "":
		fmt.Fprintf(cfg.AdminTokenOut, "admin token: %s\n", minted)
		log.Info("minted the first admin token and printed it; it is shown only once")
	case created:
		log.Info("installed the admin token from the configuration")
	}
	return nil
}
