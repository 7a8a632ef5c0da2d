package ui

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Live parts: a machine's new syslog lines as Server-Sent Events, read from the API after
// the last line the page holds.
const (
	streamPoll     = time.Second
	streamLifetime = 10 * time.Minute // then the browser reconnects (EventSource does), re-checking the session
)

// logStream sends each new syslog line of a machine as an "line" event whose data is the
// escaped HTML of the line, the page's table row.
func (u *UI) logStream(w http.ResponseWriter, r *http.Request, s *signedIn) error {
	ctx := r.Context()
	key := r.PathValue("key")
	after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if err != nil || after < 0 {
		return &statusError{http.StatusBadRequest, "after must be a message ID"}
	}
	if id, err := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64); err == nil && id > after {
		after = id
	}
	// The first read answers a refusal (403, 404) as an ordinary error, before the stream starts.
	lines, err := s.api.MachineLogs(ctx, key, url.Values{"After": {strconv.FormatInt(after, 10)}, "limit": {"500"}})
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	end := time.Now().Add(streamLifetime)
	tick := time.NewTicker(streamPoll)
	defer tick.Stop()
	for {
		_ = rc.SetWriteDeadline(time.Now().Add(streamPoll + 30*time.Second))
		var buf bytes.Buffer
		for _, m := range lines {
			if err := u.pages["machine"].ExecuteTemplate(&buf, "line", m); err != nil {
				return fmt.Errorf("render syslog line: %w", err)
			}
			fmt.Fprintf(w, "id: %d\nevent: line\n", m.ID)
			for _, l := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
				fmt.Fprintf(w, "data: %s\n", l)
			}
			fmt.Fprint(w, "\n")
			buf.Reset()
			after = m.ID
		}
		if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
			return nil
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if time.Now().After(end) {
			return nil
		}
		if lines, err = s.api.MachineLogs(ctx, key, url.Values{"After": {strconv.FormatInt(after, 10)}, "limit": {"500"}}); err != nil {
			// The session's token may have died, or the machine moved: the stream ends and
			// the browser's reconnect meets the refusal.
			u.log.Debug("UI log stream ended", "machine", key, "error", err)
			return nil
		}
	}
}
