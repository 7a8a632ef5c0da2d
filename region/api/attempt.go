package api

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParamAttempt is the query parameter naming the attempt of the batch activity a migration
// step is made by (Attempt.String). The region refuses a step from an attempt older than one
// that already acted on the machine for the same migration (ReasonStaleAttempt), so an
// attempt the server timed out cannot change a machine its retry moved on.
const ParamAttempt = "attempt"

// ReasonStaleAttempt is the Error.Reason of a step refused because a newer attempt of the
// same migration acted on the machine (409).
const ReasonStaleAttempt = "stale-attempt"

// Attempt names one attempt of an activity. Attempts are ordered by Started, the time the
// Temporal server started the attempt: a retry starts after the attempt it replaces ended, a
// settling batch (a new activity whose Number counts from 1 again) after the batch it
// settles, and an attempt after an activity reset after the one reset; Number only breaks a
// tie and names the attempt in messages.
type Attempt struct {
	Started time.Time
	Number  int32
}

// IsZero reports no attempt (none started): the call is not fenced.
func (a Attempt) IsZero() bool { return a.Started.IsZero() }

// Before reports whether a is older than b.
func (a Attempt) Before(b Attempt) bool {
	if !a.Started.Equal(b.Started) {
		return a.Started.Before(b.Started)
	}
	return a.Number < b.Number
}

// String is the wire form, "<number>@<started, RFC 3339 with nanoseconds, UTC>".
func (a Attempt) String() string {
	return fmt.Sprintf("%d@%s", a.Number, a.Started.UTC().Format(time.RFC3339Nano))
}

// ParseAttempt reads the wire form of String.
func ParseAttempt(s string) (Attempt, error) {
	num, started, ok := strings.Cut(s, "@")
	if !ok {
		return Attempt{}, fmt.Errorf("attempt %q is not <number>@<RFC 3339 start time>", s)
	}
	n, err := strconv.ParseInt(num, 10, 32)
	if err != nil || n < 1 {
		return Attempt{}, fmt.Errorf("attempt %q: the number must be a positive integer", s)
	}
	t, err := time.Parse(time.RFC3339Nano, started)
	if err != nil || t.Unix() <= 0 {
		return Attempt{}, fmt.Errorf("attempt %q: the start time must be an RFC 3339 time after 1970", s)
	}
	return Attempt{Started: t.UTC(), Number: int32(n)}, nil
}
