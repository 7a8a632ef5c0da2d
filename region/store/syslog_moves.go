package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/internal/syslogmsg"
	"github.com/ironflow/ironflow/region/api"
)

// A machine's recent syslog moves with it in its bundle: the newest messages within
// api.MaxMovedSyslog and api.MaxMovedSyslogBytes. Each keeps its origin (migration 0085), so
// an import stores only the messages the region does not hold for the machine yet, and
// records its ticket on them, so the undo of that import removes exactly those.

// movedSyslog returns the newest messages of machine within the bounds, oldest first, each
// field escaped: a row stored before a character was escaped on the way in holds it raw, and
// the importing region refuses raw control characters as it does from a rack.
func movedSyslog(ctx context.Context, q querier, machine string) ([]api.MovedSyslogMessage, error) {
	rows, err := q.Query(ctx, `SELECT id, origin::text, stored, doc FROM syslog WHERE machine = $1::uuid ORDER BY id DESC LIMIT $2`,
		machine, api.MaxMovedSyslog)
	if err != nil {
		return nil, err
	}
	var out []api.MovedSyslogMessage
	size := 0
	var id int64
	var doc []byte
	var m api.MovedSyslogMessage
	_, err = pgx.ForEachRow(rows, []any{&id, &m.Origin, &m.Stored, &doc}, func() error {
		msg, err := decode[api.SyslogMessage](doc)
		if err != nil {
			return fmt.Errorf("stored syslog message %d: %w", id, err)
		}
		syslogmsg.EscapeRecord(msg)
		// A row stored before its characters were escaped may be longer escaped than an
		// import accepts: it stays behind rather than fail the move.
		if validateSyslog(msg) != nil {
			return nil
		}
		if size += msg.Size(); size > api.MaxMovedSyslogBytes {
			return errBoundReached
		}
		m.SyslogMessage = *msg
		out = append(out, m)
		return nil
	})
	if err != nil && !errors.Is(err, errBoundReached) {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

// errBoundReached stops reading the newest messages once the next would pass the byte bound.
var errBoundReached = errors.New("moved syslog byte bound reached")

// importedSyslog checks the syslog of a bundle whose machine is machine, as SyncSyslog checks
// a rack's messages, and returns it as this region stores it. Anything wrong refuses the
// whole import, naming the message.
func importedSyslog(msgs []api.MovedSyslogMessage, machine string) ([]api.MovedSyslogMessage, error) {
	if len(msgs) > api.MaxMovedSyslog {
		return nil, invalidf("the bundle carries %d syslog messages; at most %d move with a machine", len(msgs), api.MaxMovedSyslog)
	}
	out := make([]api.MovedSyslogMessage, len(msgs))
	origins := make(map[string]int, len(msgs))
	size := 0
	for i, m := range msgs {
		fail := func(err error) error { return invalidf("the bundle's syslog message %d: %v", i, err) }
		if err := canonUUID("syslog message", "Origin", &m.Origin, false); err != nil {
			return nil, fail(err)
		}
		if j, dup := origins[m.Origin]; dup {
			return nil, fail(fmt.Errorf("Origin %s is message %d's too", m.Origin, j))
		}
		origins[m.Origin] = i
		if err := canonUUID("syslog message", "Machine", &m.Machine, true); err != nil {
			return nil, fail(err)
		}
		if m.Machine != "" && m.Machine != machine {
			return nil, fail(fmt.Errorf("it belongs to machine %s, not to %s", m.Machine, machine))
		}
		if err := canonUUID("syslog message", "Rack", &m.Rack, true); err != nil {
			return nil, fail(err)
		}
		if err := validateSyslog(&m.SyslogMessage); err != nil {
			return nil, fail(err)
		}
		if size += m.Size(); size > api.MaxMovedSyslogBytes {
			return nil, invalidf("the bundle's syslog holds more than %d bytes (at message %d); that many move with a machine at most", api.MaxMovedSyslogBytes, i)
		}
		m.ID, m.Machine = 0, machine
		out[i] = m
	}
	return out, nil
}

// insertMovedSyslog stores the messages an import brings that this region does not hold for
// the machine yet, in the bundle's order after every message stored before, and marks them
// with the import's ticket. It returns how many it stored.
func insertMovedSyslog(ctx context.Context, tx pgx.Tx, machine, ticket string, msgs []api.MovedSyslogMessage) (int64, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	received := make([]time.Time, len(msgs))
	stored := make([]*time.Time, len(msgs)) // nil: the bundle does not say
	origins := make([]string, len(msgs))
	docs := make([][]byte, len(msgs))
	for i, m := range msgs {
		doc, err := json.Marshal(m.SyslogMessage)
		if err != nil {
			return 0, fmt.Errorf("encode syslog message: %w", err)
		}
		received[i], origins[i], docs[i] = m.Received, m.Origin, doc
		if !m.Stored.IsZero() {
			stored[i] = &m.Stored
		}
	}
	// As SyncSyslog: IDs commit in increasing order, so a follower misses nothing.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", syslogInsertLock); err != nil {
		return 0, err
	}
	// Retention counts from when the first region stored a message, never from the future.
	tag, err := tx.Exec(ctx, `INSERT INTO syslog (machine, received, stored, doc, origin, import_ticket)
		SELECT $1::uuid, r, least(coalesce(s, now()), now()), d, o, $2
		FROM unnest($3::timestamptz[], $4::timestamptz[], $5::jsonb[], $6::uuid[]) WITH ORDINALITY AS t(r, s, d, o, n)
		ORDER BY n
		ON CONFLICT (machine, origin) DO NOTHING`, machine, ticket, received, stored, docs, origins)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// undoImport ends the imports of machine that did not complete (the copy is deleted or
// redirects back): the syslog messages they added go, and their tickets import nothing again.
func undoImport(ctx context.Context, tx pgx.Tx, machine string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM syslog WHERE machine = $1::uuid
		AND import_ticket IN (SELECT jti FROM tickets WHERE machine = $1::uuid AND closed_at IS NULL)`, machine); err != nil {
		return err
	}
	return closeTickets(ctx, tx, machine)
}
