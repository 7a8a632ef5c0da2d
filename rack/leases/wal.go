package leases

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// The log is a sequence of frames [payload length u32][CRC-32C of payload u32][payload],
// followed by zeros. The file is preallocated in chunks: overwriting allocated space lets
// fdatasync skip the journal commit that every size-extending append would cost (about
// 4 ms against 0.2 ms on the ext4 disks measured), and a zero length marks the end.
const (
	frameHeader = 8
	maxPayload  = 1 << 16
	growChunk   = 4 << 20
	walName     = "leases.wal"
	maxYields   = 16 // bounds how long a leader gathers its group
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// wal is an append-only log with group commit: concurrent appenders wait for one
// write+fdatasync (done by whichever of them gets there first) that covers them all.
type wal struct {
	dir  string
	mu   sync.Mutex
	cond *sync.Cond
	f    *os.File
	fd   int      // f's descriptor
	aio  *aioSync // nil when unavailable: fdatasync then blocks its P
	off  int64    // where the next batch is written
	size int64    // allocated file size

	pending, spare []byte // frames appended but not yet written
	appended       uint64 // sequence number of the last appended frame
	synced         uint64 // every frame up to this one is durable
	syncing        bool   // a leader is writing; others wait on cond
	err            error  // sticky: after a failed write nothing is acknowledged again
}

// openWAL opens (or creates) the log in dir and returns the payloads of its intact frames.
// A torn or corrupt tail (a crash mid-write) is cut off and reported by torn.
func openWAL(dir string) (w *wal, payloads [][]byte, torn bool, err error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, nil, false, fmt.Errorf("lease log directory: %w", err)
	}
	path := filepath.Join(dir, walName)
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, false, fmt.Errorf("read lease log: %w", err)
	}
	payloads, end, torn := parseFrames(data)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, nil, false, fmt.Errorf("open lease log: %w", err)
	}
	size := int64(len(data))
	if torn {
		// Drop the torn bytes so that later, shorter frames cannot be followed by stale ones.
		if err := f.Truncate(end); err != nil {
			f.Close()
			return nil, nil, false, fmt.Errorf("truncate torn lease log: %w", err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, nil, false, fmt.Errorf("sync lease log: %w", err)
		}
		size = end
	}
	w = &wal{dir: dir, f: f, fd: int(f.Fd()), off: end, size: size}
	if w.aio, err = newAIOSync(); err != nil {
		w.aio = nil // the plain fdatasync works everywhere
	}
	w.cond = sync.NewCond(&w.mu)
	return w, payloads, torn, nil
}

// parseFrames returns the intact payloads, the offset after the last one, and whether
// non-zero bytes that do not form a valid frame follow it.
func parseFrames(data []byte) (payloads [][]byte, end int64, torn bool) {
	off := 0
	for len(data)-off >= frameHeader {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		if n == 0 {
			return payloads, int64(off), !allZero(data[off:])
		}
		sum := binary.LittleEndian.Uint32(data[off+4:])
		if n > maxPayload || n > len(data)-off-frameHeader {
			return payloads, int64(off), true
		}
		p := data[off+frameHeader : off+frameHeader+n]
		if crc32.Checksum(p, crcTable) != sum {
			return payloads, int64(off), true
		}
		payloads = append(payloads, p)
		off += frameHeader + n
	}
	return payloads, int64(off), !allZero(data[off:])
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// appendLeaseFrame appends the frame of l's record to b.
func appendLeaseFrame(b []byte, l *Lease) []byte {
	start := len(b)
	b = append(b, make([]byte, frameHeader)...)
	b = appendRecord(b, l)
	payload := b[start+frameHeader:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(payload, crcTable))
	return b
}

// append queues l's record and returns its sequence number for wait. It never blocks on I/O.
func (w *wal) append(l *Lease) uint64 {
	w.mu.Lock()
	w.pending = appendLeaseFrame(w.pending, l)
	w.appended++
	seq := w.appended
	w.mu.Unlock()
	return seq
}

// wait returns once frame seq is durable. The first waiter to find no write in progress
// becomes the leader: it writes everything pending and syncs once for the whole group.
func (w *wal) wait(seq uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.synced < seq {
		if w.err != nil {
			return w.err
		}
		if w.syncing {
			w.cond.Wait()
			continue
		}
		w.flushLocked()
	}
	return nil
}

// flushLocked writes and syncs the pending frames; w.mu is held on entry and exit but
// released during I/O so that appenders can queue the next group meanwhile.
func (w *wal) flushLocked() {
	w.syncing = true
	// Let goroutines that are about to append run first, so that this sync covers them
	// too. This matters most with GOMAXPROCS=1, where fdatasync holds the only P.
	for range maxYields {
		n := w.appended
		w.mu.Unlock()
		runtime.Gosched()
		w.mu.Lock()
		if w.appended == n {
			break
		}
	}
	batch, target, off := w.pending, w.appended, w.off
	w.pending, w.spare = w.spare[:0], nil
	w.mu.Unlock()
	err := w.writeAt(batch, off)
	w.mu.Lock()
	w.syncing = false
	w.spare = batch
	if err != nil {
		w.err = fmt.Errorf("lease log: %w", err)
	} else {
		w.off += int64(len(batch))
		w.synced = target
	}
	w.cond.Broadcast()
}

// writeAt writes b at off, growing the preallocated area first when needed, and syncs.
// Only the leader calls it, so w.f and w.size need no lock.
func (w *wal) writeAt(b []byte, off int64) error {
	if end := off + int64(len(b)); end > w.size {
		grow := (end - w.size + growChunk - 1) / growChunk * growChunk
		if err := unix.Fallocate(w.fd, 0, w.size, grow); err != nil {
			return fmt.Errorf("preallocate: %w", err)
		}
		w.size += grow
	}
	if _, err := w.f.WriteAt(b, off); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := w.datasync(); err != nil {
		return fmt.Errorf("fdatasync: %w", err)
	}
	return nil
}

func (w *wal) datasync() error {
	if w.aio != nil {
		err := w.aio.fdatasync(w.fd)
		if !errors.Is(err, errAIOUnsupported) {
			return err
		}
		w.aio.close()
		w.aio = nil
	}
	return unix.Fdatasync(w.fd)
}

// length is the number of bytes of frames in the log, durable or pending.
func (w *wal) length() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.off + int64(len(w.pending))
}

// replace atomically swaps the log for one holding exactly frames (a snapshot of the
// table). The caller must prevent appends while it runs; frames pending at the time are
// covered by the snapshot and count as durable once it is.
func (w *wal) replace(frames []byte) error {
	w.mu.Lock()
	for w.syncing {
		w.cond.Wait()
	}
	if w.err != nil {
		defer w.mu.Unlock()
		return w.err
	}
	w.syncing = true
	target := w.appended
	w.mu.Unlock()

	f, size, err := w.writeSnapshot(frames)

	w.mu.Lock()
	defer w.mu.Unlock()
	w.syncing = false
	w.cond.Broadcast()
	if err != nil {
		return fmt.Errorf("compact lease log: %w", err)
	}
	w.f.Close()
	w.f, w.fd, w.off, w.size = f, int(f.Fd()), size, size
	w.pending = w.pending[:0]
	w.synced = target
	return nil
}

func (w *wal) writeSnapshot(b []byte) (*os.File, int64, error) {
	tmp := filepath.Join(w.dir, walName+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return nil, 0, err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, 0, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, 0, err
	}
	if err := os.Rename(tmp, filepath.Join(w.dir, walName)); err != nil {
		f.Close()
		return nil, 0, err
	}
	if err := syncDir(w.dir); err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, int64(len(b)), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// close flushes what is pending and closes the file.
func (w *wal) close() error {
	w.mu.Lock()
	seq := w.appended
	w.mu.Unlock()
	err := w.wait(seq)
	w.mu.Lock()
	defer w.mu.Unlock()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if w.aio != nil {
		w.aio.close()
	}
	if w.err == nil {
		w.err = errors.New("lease log closed")
	}
	return err
}
