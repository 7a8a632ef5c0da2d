package proxy

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Cache keeps upstream responses on disk by URL, at most a number of bytes, evicting the
// least recently used. Each object is one file written under a temporary name and renamed
// when its whole body arrived, so a reader sees a complete object or none; the file holds
// its own metadata (URL, headers, length) after the body, which a reader checks against what it reads, so a
// replaced or damaged file is never served as another object.
type Cache struct {
	dir string

	mu      sync.Mutex
	limit   int64
	size    int64
	lru     *list.List               // of *cached, most recent first
	byKey   map[string]*list.Element // of lru
	flights map[string]chan struct{} // misses being fetched, closed when done
}

// cached is what the cache keeps in memory of an object on disk.
type cached struct {
	key     string
	size    int64     // of the file
	expires time.Time // of an untilExpiry object, moved on by a revalidation
}

// meta is the trailer of an object's file, after its body.
type meta struct {
	URL     string      `json:"url"`
	Header  http.Header `json:"header"` // the response headers a client gets again
	Length  int64       `json:"length"` // of the body
	Policy  policy      `json:"policy"`
	Expires time.Time   `json:"expires"`
}

// storedHeaders are the response headers an object keeps.
var storedHeaders = []string{"Content-Type", "Content-Encoding", "ETag", "Last-Modified", "Cache-Control", "Expires"}

const tmpDir = "tmp"

// OpenCache opens the cache in dir, creating it, with limit bytes (0: nothing is kept).
// Objects already there are kept, the most recently written first; temporary files of
// writes that never finished and files that are not whole objects are removed.
func OpenCache(dir string, limit int64) (*Cache, error) {
	if err := os.MkdirAll(filepath.Join(dir, tmpDir), 0o750); err != nil {
		return nil, fmt.Errorf("proxy cache: %w", err)
	}
	c := &Cache{dir: dir, lru: list.New(), byKey: map[string]*list.Element{}, flights: map[string]chan struct{}{}}
	if err := c.removeTemporary(); err != nil {
		return nil, err
	}
	if err := c.load(); err != nil {
		return nil, err
	}
	c.SetLimit(limit)
	return c, nil
}

func (c *Cache) removeTemporary() error {
	tmp := filepath.Join(c.dir, tmpDir)
	names, err := os.ReadDir(tmp)
	if err != nil {
		return fmt.Errorf("proxy cache: %w", err)
	}
	for _, n := range names {
		if err := os.Remove(filepath.Join(tmp, n.Name())); err != nil {
			return fmt.Errorf("proxy cache: %w", err)
		}
	}
	return nil
}

// load indexes the objects on disk, oldest last in the LRU.
func (c *Cache) load() error {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("proxy cache: %w", err)
	}
	type found struct {
		cached
		mtime time.Time
	}
	var all []found
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		path := filepath.Join(c.dir, e.Name())
		m, size, err := readMeta(path)
		if err != nil || keyOf(m.URL) != e.Name() {
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("proxy cache: remove a damaged object: %w", err)
			}
			continue
		}
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("proxy cache: %w", err)
		}
		all = append(all, found{cached{key: e.Name(), size: size, expires: m.Expires}, info.ModTime()})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mtime.After(all[j].mtime) })
	for _, f := range all {
		c.byKey[f.key] = c.lru.PushBack(&f.cached)
		c.size += f.size
	}
	return nil
}

// readMeta reads an object file's trailer and checks the file holds exactly its body.
func readMeta(path string) (meta, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return meta{}, 0, err
	}
	defer f.Close()
	m, size, err := readTrailer(f)
	return m, size, err
}

// readTrailer reads the trailer of an open object file: its meta, after the body, then the
// meta's length (4 bytes). The file's size must be the body's Length and the trailer exactly.
func readTrailer(f *os.File) (meta, int64, error) {
	info, err := f.Stat()
	if err != nil {
		return meta{}, 0, err
	}
	var tail [4]byte
	if _, err := f.ReadAt(tail[:], info.Size()-4); err != nil {
		return meta{}, 0, fmt.Errorf("object trailer: %w", err)
	}
	n := int64(binary.BigEndian.Uint32(tail[:]))
	if n > 1<<20 || n+4 > info.Size() {
		return meta{}, 0, errors.New("object trailer too long")
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, info.Size()-4-n); err != nil {
		return meta{}, 0, fmt.Errorf("object trailer: %w", err)
	}
	var m meta
	if err := json.Unmarshal(buf, &m); err != nil {
		return meta{}, 0, fmt.Errorf("object trailer: %w", err)
	}
	if body := info.Size() - 4 - n; body != m.Length {
		return meta{}, 0, fmt.Errorf("object holds %d bytes of body, not %d", body, m.Length)
	}
	return m, info.Size(), nil
}

func keyOf(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:])
}

// SetLimit bounds the cache to limit bytes, evicting what is over it.
func (c *Cache) SetLimit(limit int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limit = max(limit, 0)
	c.evictLocked()
}

// Size is the bytes and number of objects the cache holds.
func (c *Cache) Size() (bytes int64, objects int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size, c.lru.Len()
}

func (c *Cache) evictLocked() {
	for c.size > c.limit && c.lru.Len() > 0 {
		c.removeLocked(c.lru.Back().Value.(*cached).key)
	}
}

func (c *Cache) removeLocked(key string) {
	el, ok := c.byKey[key]
	if !ok {
		return
	}
	c.lru.Remove(el)
	delete(c.byKey, key)
	c.size -= el.Value.(*cached).size
	// An open reader keeps its file until it closes it.
	_ = os.Remove(filepath.Join(c.dir, key))
}

// object is a cached object opened for reading: its meta and body are from one file.
type object struct {
	meta
	expires time.Time
	body    *io.SectionReader
	file    *os.File
}

func (o *object) Close() error { return o.file.Close() }

// open returns the object cached for url, or false. A file that does not hold what its
// head says is dropped.
func (c *Cache) open(url string) (*object, bool) {
	key := keyOf(url)
	c.mu.Lock()
	el, ok := c.byKey[key]
	var expires time.Time
	if ok {
		c.lru.MoveToFront(el)
		expires = el.Value.(*cached).expires
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	f, err := os.Open(filepath.Join(c.dir, key))
	if err != nil {
		c.drop(key)
		return nil, false
	}
	m, _, err := readTrailer(f)
	if err != nil || m.URL != url {
		f.Close()
		c.drop(key)
		return nil, false
	}
	return &object{meta: m, expires: expires, body: io.NewSectionReader(f, 0, m.Length), file: f}, true
}

func (c *Cache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(key)
}

// revalidated records that the upstream confirmed url's cached copy, fresh until expires.
func (c *Cache) revalidated(url string, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[keyOf(url)]; ok {
		el.Value.(*cached).expires = expires
	}
}

// fetch makes the caller the one fetching url from upstream (leader true), or returns a
// channel closed when the caller fetching it now is done. A leader calls the returned done.
func (c *Cache) fetch(url string) (leader bool, wait <-chan struct{}, done func()) {
	key := keyOf(url)
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.flights[key]; ok {
		return false, ch, nil
	}
	ch := make(chan struct{})
	c.flights[key] = ch
	return true, nil, func() {
		c.mu.Lock()
		delete(c.flights, key)
		c.mu.Unlock()
		close(ch)
	}
}

// writer is an object being written: nothing of it is visible until commit.
type writer struct {
	c    *Cache
	m    meta
	f    *os.File
	n    int64 // body bytes written
	fail error // the first write error: the object is dropped at commit
}

// create starts writing the object for url with the response header h; it is never bigger
// than the cache's limit.
func (c *Cache) create(url string, h http.Header, p policy, expires time.Time) (*writer, error) {
	m := meta{URL: url, Header: http.Header{}, Policy: p, Expires: expires}
	for _, k := range storedHeaders {
		for _, v := range h.Values(k) {
			m.Header.Add(k, v)
		}
	}
	f, err := os.CreateTemp(filepath.Join(c.dir, tmpDir), "object-")
	if err != nil {
		return nil, err
	}
	return &writer{c: c, m: m, f: f}, nil
}

// Write stores body bytes; after a failure (the disk full, the object over the limit) it
// stores nothing more and reports no error, so the client's copy goes on.
func (w *writer) Write(p []byte) (int, error) {
	if w.fail != nil {
		return len(p), nil
	}
	if w.n+int64(len(p)) > w.c.limitNow() {
		w.fail = errTooBig
		return len(p), nil
	}
	n, err := w.f.Write(p)
	w.n += int64(n)
	if err != nil {
		w.fail = err
	}
	return len(p), nil
}

var errTooBig = errors.New("object bigger than the cache")

func (c *Cache) limitNow() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limit
}

// commit makes the object visible when its body is whole: length bytes (-1: unknown, the
// upstream ended it cleanly). Anything else drops it.
func (w *writer) commit(length int64) error {
	defer w.abort()
	if w.fail != nil {
		return w.fail
	}
	if length >= 0 && w.n != length {
		return fmt.Errorf("object of %s: %d bytes written, the upstream said %d", w.m.URL, w.n, length)
	}
	w.m.Length = w.n
	trailer, err := json.Marshal(w.m)
	if err != nil {
		return err
	}
	trailer = binary.BigEndian.AppendUint32(trailer, uint32(len(trailer)))
	if _, err := w.f.Write(trailer); err != nil {
		return err
	}
	if err := w.f.Close(); err != nil {
		return err
	}
	return w.c.insert(w.f.Name(), w.m, w.n+int64(len(trailer)))
}

// abort drops what was written.
func (w *writer) abort() {
	w.f.Close()
	os.Remove(w.f.Name())
}

// insert renames a whole object file into place and accounts for it.
func (c *Cache) insert(tmp string, m meta, size int64) error {
	key := keyOf(m.URL)
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.limit {
		return errTooBig
	}
	c.removeLocked(key)
	if err := os.Rename(tmp, filepath.Join(c.dir, key)); err != nil {
		return err
	}
	c.byKey[key] = c.lru.PushFront(&cached{key: key, size: size, expires: m.Expires})
	c.size += size
	c.evictLocked()
	return nil
}
