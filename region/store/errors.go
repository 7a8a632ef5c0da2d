package store

import (
	"errors"
	"fmt"
	"strings"
)

// Error classes; the server maps them to HTTP status codes with errors.Is.
var (
	ErrNotFound     = errors.New("not found")            // 404
	ErrConflict     = errors.New("conflict")             // 409: duplicate Name/MAC/UUID
	ErrInUse        = errors.New("in use")               // 409: dependents exist and force was not given
	ErrInvalid      = errors.New("invalid")              // 422: the object or key is not acceptable
	ErrUnauthorized = errors.New("unauthorized")         // 401: unknown, expired or revoked token
	ErrForbidden    = errors.New("forbidden")            // 403: the caller may not act on this object
	ErrUnavailable  = errors.New("database unavailable") // 503: PostgreSQL cannot be reached
	ErrFull         = errors.New("full")                 // 429: a bounded queue holds all it may
	ErrTooLarge     = errors.New("too large")            // 413: more than one request may carry
)

// DependencyError says which objects keep Kind/Key from being deleted.
type DependencyError struct {
	Kind       string
	Key        string
	Dependents []string // human readable, e.g. "vlan 3f2a… (primary DHCP)", "pod kvm-01"
}

func (e *DependencyError) Error() string {
	return fmt.Sprintf("%s %s is in use by %s (use force=true to override where allowed)", e.Kind, e.Key, strings.Join(e.Dependents, ", "))
}

// Unwrap makes errors.Is(err, ErrInUse) true.
func (e *DependencyError) Unwrap() error { return ErrInUse }
