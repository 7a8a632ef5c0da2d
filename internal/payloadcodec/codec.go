// Package payloadcodec encrypts Temporal payloads (workflow inputs and results, activity
// arguments, memos, schedule arguments) with AES-256-GCM, so whoever reads a namespace's
// histories sees no grant, token or ticket. Each payload names the key that sealed it:
// payloads are sealed with the current key and opened with any key of the key file, and
// payloads sealed by no key (histories recorded before encryption) pass through unchanged.
package payloadcodec

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Metadata of a sealed payload; the names are those of Temporal's encryption samples, which
// the web UI and other codec servers recognise.
const (
	EncodingEncrypted = "binary/encrypted"
	MetadataKeyID     = "encryption-key-id"
)

// KeySize is the size of a key: AES-256.
const KeySize = 32

// Codec seals and opens payloads; it is a converter.PayloadCodec.
type Codec struct {
	current string
	keys    map[string]cipher.AEAD
}

var _ converter.PayloadCodec = (*Codec)(nil)

// Parse reads a key file: one key a line, "id:base64key" (32 bytes), the first line the
// current key; blank lines and lines starting with # are skipped.
func Parse(r io.Reader) (*Codec, error) {
	c := &Codec{keys: map[string]cipher.AEAD{}}
	lines := bufio.NewScanner(r)
	for n := 1; lines.Scan(); n++ {
		line := strings.TrimSpace(lines.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, encoded, ok := strings.Cut(line, ":")
		id = strings.TrimSpace(id)
		if !ok || id == "" {
			return nil, fmt.Errorf("line %d: want id:base64key", n)
		}
		if _, dup := c.keys[id]; dup {
			return nil, fmt.Errorf("line %d: key %q appears twice", n, id)
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
		if err != nil || len(key) != KeySize {
			// The key itself never enters the message: the error may be logged.
			return nil, fmt.Errorf("line %d: key %q is not %d bytes in base64", n, id, KeySize)
		}
		aead, err := newAEAD(key)
		if err != nil {
			return nil, fmt.Errorf("line %d: key %q: %w", n, id, err)
		}
		c.keys[id] = aead
		if c.current == "" {
			c.current = id
		}
	}
	if err := lines.Err(); err != nil {
		return nil, fmt.Errorf("read keys: %w", err)
	}
	if c.current == "" {
		return nil, errors.New("no key")
	}
	return c, nil
}

// LoadFile reads the key file at path, which only its owner may read or write (0600).
func LoadFile(path string) (*Codec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("payload keys: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("payload keys: %w", err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("payload keys %s: mode %04o lets others read the keys; chmod 600 it", path, perm)
	}
	c, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("payload keys %s: %w", path, err)
	}
	return c, nil
}

// EnsureFile creates a key file at path with one new key (mode 0600) unless one is there,
// and loads it.
func EnsureFile(path string) (*Codec, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("payload key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, os.ErrExist):
	case err != nil:
		return nil, fmt.Errorf("payload keys: %w", err)
	default:
		line := time.Now().UTC().Format("20060102T150405") + ":" + base64.StdEncoding.EncodeToString(key) + "\n"
		_, err = f.WriteString(line)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("payload keys %s: %w", path, err)
		}
	}
	return LoadFile(path)
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// CurrentKeyID is the ID of the key new payloads are sealed with.
func (c *Codec) CurrentKeyID() string { return c.current }

// DataConverter is Temporal's default data converter with every payload sealed by c.
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// Encode seals each payload, whole (its metadata too: an encoding can say what it holds),
// with the current key; the key ID is the additional data, so a payload relabelled with
// another key's ID does not open.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	aead := c.keys[c.current]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("encode payload: %w", err)
		}
		nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return nil, fmt.Errorf("encode payload: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(EncodingEncrypted), MetadataKeyID: []byte(c.current)},
			Data:     aead.Seal(nonce, nonce, plain, []byte(c.current)),
		}
	}
	return out, nil
}

// Decode opens each sealed payload with the key it names; a payload that is not sealed is
// returned as it is.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != EncodingEncrypted {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := c.keys[id]
		if !ok {
			return nil, fmt.Errorf("decode payload: sealed with key %q, which the key file does not have", id)
		}
		data := p.GetData()
		if len(data) < aead.NonceSize() {
			return nil, errors.New("decode payload: shorter than a nonce")
		}
		plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(id))
		if err != nil {
			return nil, fmt.Errorf("decode payload sealed with key %q: %w", id, err)
		}
		opened := &commonpb.Payload{}
		if err := proto.Unmarshal(plain, opened); err != nil {
			return nil, fmt.Errorf("decode payload sealed with key %q: %w", id, err)
		}
		out[i] = opened
	}
	return out, nil
}
