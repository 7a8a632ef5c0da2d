package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PostgreSQL text holds UTF-8 without NUL, and the JSON decoder would quietly turn invalid
// UTF-8 into U+FFFD: requests carrying either are refused up front with 400 naming where,
// rather than failing in the database (500) or being stored altered.

// checkRequestText refuses NUL and invalid UTF-8 in the path and the query of r.
func checkRequestText(r *http.Request) error {
	if msg := badText(r.URL.Path); msg != "" {
		return errorf(http.StatusBadRequest, "the request path %s", msg)
	}
	for name, values := range r.URL.Query() {
		if msg := badText(name); msg != "" {
			return errorf(http.StatusBadRequest, "a query parameter name %s", msg)
		}
		for _, v := range values {
			if msg := badText(v); msg != "" {
				return errorf(http.StatusBadRequest, "query parameter %s %s", strconv.QuoteToASCII(name), msg)
			}
		}
	}
	return nil
}

// badText says what is wrong with s, or "".
func badText(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.ContainsRune(s, 0):
		return "contains a NUL character"
	}
	return ""
}

// checkJSONText refuses a well-formed JSON document whose strings (keys or values) hold NUL
// or invalid UTF-8, naming the first such field. Documents with neither skip the walk.
func checkJSONText(data []byte) error {
	bad := firstInvalidUTF8(data)
	if bad < 0 && !bytes.Contains(data, []byte(`\u0000`)) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // malformed or done: decoding reports the former
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		isKey := top != nil && top.object && top.wantKey
		switch {
		case isKey:
			top.key, top.wantKey = tok.(string), false
		case top != nil && top.object:
			top.wantKey = true // this value completes the member
		case top != nil:
			top.index++
		}
		if s, ok := tok.(string); ok {
			msg := badText(s)
			if bad >= 0 && int64(bad) < dec.InputOffset() {
				msg = "is not valid UTF-8"
			}
			if msg != "" {
				where := "field " + fieldPath(stack)
				if isKey {
					where = "a field name in " + fieldPath(stack[:len(stack)-1])
				}
				return errorf(http.StatusBadRequest, "%s %s", where, msg)
			}
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &level{object: d == '{', wantKey: d == '{', index: -1})
		}
	}
}

// level is an object or array being walked, and where in it the walk is.
type level struct {
	object  bool
	wantKey bool   // the next token of an object is a member name
	key     string // the current member of an object
	index   int    // the current element of an array
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// fieldPath renders the position of a walk, e.g. Meta["a b"], Params.x, [3].Hostname.
func fieldPath(stack []*level) string {
	var b strings.Builder
	for _, l := range stack {
		switch {
		case !l.object:
			fmt.Fprintf(&b, "[%d]", l.index)
		case plainKey.MatchString(l.key):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(l.key)
		default:
			fmt.Fprintf(&b, "[%s]", strconv.QuoteToASCII(l.key))
		}
	}
	if b.Len() == 0 {
		return "(the document)"
	}
	return b.String()
}

// firstInvalidUTF8 returns the offset of the first byte of data that is not valid UTF-8, or -1.
func firstInvalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}
