package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// classedError carries an operator-facing message and the class (ErrInvalid, ...) that
// errors.Is reports, without prefixing the message with the class name.
type classedError struct {
	msg   string
	class error
}

func (e *classedError) Error() string { return e.msg }
func (e *classedError) Unwrap() error { return e.class }

func classed(class error, format string, a ...any) error {
	return &classedError{msg: fmt.Sprintf(format, a...), class: class}
}

func invalidf(format string, a ...any) error  { return classed(ErrInvalid, format, a...) }
func notFoundf(format string, a ...any) error { return classed(ErrNotFound, format, a...) }
func conflictf(format string, a ...any) error { return classed(ErrConflict, format, a...) }

var classes = []error{ErrNotFound, ErrConflict, ErrInUse, ErrInvalid, ErrUnauthorized, ErrForbidden, ErrUnavailable, ErrFull, ErrTooLarge}

// classify marks failures to reach PostgreSQL as ErrUnavailable; other errors pass unchanged.
func classify(err error) error {
	if err == nil {
		return nil
	}
	for _, c := range classes {
		if errors.Is(err, c) {
			return err
		}
	}
	if unreachable(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

func unreachable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 is connection exception; 57P0x is shutdown/cannot connect now; 53300 too many connections.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P0") || pgErr.Code == "53300"
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr), errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return pgconn.SafeToRetry(err)
}

// PostgreSQL error details name the offending key, e.g.
// `Key (name)=(birdy) already exists.` and `Key (pool)=(gold) is not present in table "pools".`
var (
	detailKey   = regexp.MustCompile(`^Key \((.+?)\)=\((.*)\) `)
	detailTable = regexp.MustCompile(`table "([^"]+)"`)
)

// SQLSTATE codes the store translates.
const (
	errUniqueViolate = "23505"
	errForeignKey    = "23503"
	errCheck         = "23514"
	errBadText       = "22P02"
)

func pgError(err error) *pgconn.PgError {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr
	}
	return nil
}

// detailValue is the key value a constraint error is about; for a composite key, the last
// column (leases: the address within its subnet).
func detailValue(pgErr *pgconn.PgError) string {
	m := detailKey.FindStringSubmatch(pgErr.Detail)
	if m == nil {
		return ""
	}
	if strings.Contains(m[1], ",") {
		parts := strings.Split(m[2], ", ")
		return parts[len(parts)-1]
	}
	return m[2]
}

// nouns names the object a table holds, for messages.
var nouns = map[string]string{
	"pools": "pool", "profiles": "profile", "machines": "machine", "jobs": "job", "racks": "rack",
	"fabrics": "fabric", "vlans": "vlan", "subnets": "subnet", "leases": "lease", "pods": "pod",
	"users": "user", "domains": "domain", "dnsrecords": "dnsrecord",
}

// missingReferent turns a foreign key violation on insert/update into ErrInvalid naming the
// object that does not exist, e.g. `pool "gold" does not exist`.
func missingReferent(pgErr *pgconn.PgError) error {
	noun := "referenced object"
	if m := detailTable.FindStringSubmatch(pgErr.Detail); m != nil {
		if n, ok := nouns[m[1]]; ok {
			noun = n
		}
	}
	return invalidf("%s %q does not exist", noun, detailValue(pgErr))
}
