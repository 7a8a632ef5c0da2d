package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxBody is the largest request body accepted.
const maxBody = 1 << 20

// maxImportBody bounds a migration bundle: a machine with all its jobs and their logs.
const maxImportBody = 256 << 20

// readBody reads the whole request body, refusing more than maxBody bytes with 413.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return readBodyUpTo(w, r, maxBody)
}

func readBodyUpTo(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, errorf(http.StatusRequestEntityTooLarge, "request body is larger than %d bytes", tooBig.Limit)
	}
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "reading request body: %v", err)
	}
	return body, nil
}

// decodeBody reads the request body as exactly one JSON value into v; see decodeStrict.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeBodyUpTo(w, r, v, maxBody)
}

func decodeBodyUpTo(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	body, err := readBodyUpTo(w, r, limit)
	if err != nil {
		return err
	}
	return decodeStrict(body, v)
}

// decodeStrict decodes exactly one JSON value into v, refusing unknown fields and trailing
// data, with a 400 message naming the field or the (0-based) byte offset at fault. Strings
// holding NUL or invalid UTF-8 are refused too (checkJSONText).
func decodeStrict(data []byte, v any) error {
	if err := decodeOne(data, v); err != nil {
		return err
	}
	return checkJSONText(data)
}

// decodeBodyForStore is decodeBody without the text check, for a body the store validates
// record by record, every string included: a rack's lease batch, where one client's hostname
// with a NUL must be refused alone rather than with its whole batch.
func decodeBodyForStore(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decodeOne(body, v)
}

// decodeOne is decodeStrict without the text check.
func decodeOne(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber() // keeps big integers exact when v is an `any`
	if err := dec.Decode(v); err != nil {
		return errorf(http.StatusBadRequest, "%s", describeJSONError(err))
	}
	if rest := bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return errorf(http.StatusBadRequest, "unexpected data after the JSON value at offset %d", len(data)-len(rest))
	}
	return nil
}

func describeJSONError(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "empty request body, expected a JSON value"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: the body ends in the middle of a value"
	case errors.As(err, &syntax):
		// Offset counts the bytes read including the bad one; report the bad byte's own offset.
		return fmt.Sprintf("malformed JSON at offset %d: %s", max(syntax.Offset-1, 0), strings.TrimPrefix(syntax.Error(), "json: "))
	case errors.As(err, &typ) && typ.Field != "":
		return fmt.Sprintf("field %s: expected %s, got JSON %s", typ.Field, typ.Type, typ.Value)
	case errors.As(err, &typ):
		return fmt.Sprintf("expected %s, got JSON %s", typ.Type, typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return "invalid JSON: " + strings.TrimPrefix(err.Error(), "json: ")
}
