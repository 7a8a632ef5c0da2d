package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// httpError is an error found by the server itself, with the status it is answered with.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &httpError{code: code, msg: fmt.Sprintf(format, args...)}
}

// statusOf maps an error to its HTTP status: the server's own errors carry one, the store's
// error classes map as the store contract says, anything else is a 500.
func statusOf(err error) int {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.code
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrInUse), errors.Is(err, store.ErrReplayed):
		return http.StatusConflict
	case errors.Is(err, store.ErrInvalid):
		return http.StatusUnprocessableEntity
	case errors.Is(err, store.ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, store.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, store.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, store.ErrFull):
		return http.StatusTooManyRequests
	case errors.Is(err, store.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusInternalServerError
}

// writeError answers with the JSON error body. Details of unexpected (500) errors go to the
// log only, since they may show internals.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	msg := err.Error()
	if code == http.StatusInternalServerError {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		msg = "internal server error"
	}
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ironflow"`)
	}
	e := api.Error{Error: msg, Code: code}
	if errors.Is(err, store.ErrStaleAttempt) {
		e.Reason = api.ReasonStaleAttempt
	}
	writeJSON(w, code, e)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only api types are written; they always marshal.
		code, body = http.StatusInternalServerError, []byte(`{"Error":"internal server error","Code":500}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(body, '\n'))
}
