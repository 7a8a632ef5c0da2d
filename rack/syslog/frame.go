package syslog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// errTooLong is a newline-framed message longer than the limit: it was skipped up to its
// newline and the connection can go on.
var errTooLong = errors.New("message too long")

// errBadFrame is an octet count that is malformed or over the limit: the stream cannot be
// resynchronised, so the connection ends.
var errBadFrame = errors.New("bad octet-counted frame")

// readFrame reads one message of a syslog TCP stream (RFC 6587): octet-counted
// ("LEN SP MSG") when it starts with a digit, else up to the next newline (a trailing CR is
// removed). r's buffer must hold max+2 bytes. The result is valid until the next read.
func readFrame(r *bufio.Reader, max int) ([]byte, error) {
	first, err := r.Peek(1)
	if err != nil {
		return nil, err
	}
	if first[0] >= '0' && first[0] <= '9' {
		return readCounted(r, max)
	}
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = r.ReadSlice('\n')
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return nil, errTooLong
	}
	if errors.Is(err, io.EOF) && len(line) > 0 {
		err = nil // the last message of a stream may lack its newline
	}
	if err != nil {
		return nil, err
	}
	line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
	if len(line) > max {
		return nil, errTooLong
	}
	return line, nil
}

// readCounted reads "LEN SP MSG" with LEN of at most 6 digits and at most max.
func readCounted(r *bufio.Reader, max int) ([]byte, error) {
	n := 0
	for digits := 0; ; digits++ {
		c, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		if c == ' ' && digits > 0 {
			break
		}
		if c < '0' || c > '9' || digits == 6 {
			return nil, fmt.Errorf("%w: octet count is not a number", errBadFrame)
		}
		n = n*10 + int(c-'0')
	}
	if n > max {
		return nil, fmt.Errorf("%w: %d octets is more than %d", errBadFrame, n, max)
	}
	buf, err := r.Peek(n)
	if err != nil {
		return nil, err
	}
	r.Discard(n)
	return buf, nil
}
