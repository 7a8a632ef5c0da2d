package leases

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// aioSync runs fdatasync through Linux native AIO (IOCB_CMD_FDSYNC, kernel ≥ 4.18) and
// waits for it on an eventfd in the netpoller. A plain fdatasync is a blocking syscall
// that keeps its P for milliseconds (the runtime's monitor may not take the P back in
// time): with GOMAXPROCS=1 that stops DHCP entirely during every group commit. Parked on
// the eventfd instead, the leader lets the next group be received and prepared while
// the disk works.
type aioSync struct {
	ctx  uintptr
	efd  int      // eventfd the kernel signals on completion
	done *os.File // the same eventfd, read through the netpoller
	// Kept on the heap: the kernel reads them during io_submit.
	cb  iocb
	cbs [1]*iocb
}

// iocb is struct iocb of linux/aio_abi.h (little-endian layout, as on amd64 and arm64).
type iocb struct {
	data      uint64
	key       uint32
	rwFlags   uint32
	opcode    uint16
	reqprio   int16
	fildes    uint32
	buf       uint64
	nbytes    uint64
	offset    int64
	reserved2 uint64
	flags     uint32
	resfd     uint32
}

type ioEvent struct {
	data, obj uint64
	res, res2 int64
}

const (
	iocbCmdFdsync = 3
	iocbFlagResfd = 1 << 0
)

func newAIOSync() (*aioSync, error) {
	a := &aioSync{}
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&a.ctx)), 0); e != 0 {
		return nil, fmt.Errorf("io_setup: %w", e)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Syscall(unix.SYS_IO_DESTROY, a.ctx, 0, 0)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	a.efd, a.done = efd, os.NewFile(uintptr(efd), "lease-log-aio")
	return a, nil
}

// errAIOUnsupported means the file system refused an AIO fdatasync.
var errAIOUnsupported = errors.New("AIO fdatasync not supported")

// fdatasync makes fd's data durable; only one call may run at a time.
func (a *aioSync) fdatasync(fd int) error {
	a.cb = iocb{opcode: iocbCmdFdsync, fildes: uint32(fd), flags: iocbFlagResfd, resfd: uint32(a.efd)}
	a.cbs[0] = &a.cb
	n, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, a.ctx, 1, uintptr(unsafe.Pointer(&a.cbs[0])))
	if e == unix.EINVAL || (e == 0 && n != 1) {
		return errAIOUnsupported
	}
	if e != 0 {
		return fmt.Errorf("io_submit: %w", e)
	}
	var count [8]byte
	if _, err := io.ReadFull(a.done, count[:]); err != nil {
		return fmt.Errorf("wait for AIO completion: %w", err)
	}
	var ev ioEvent
	if _, _, e := unix.Syscall6(unix.SYS_IO_GETEVENTS, a.ctx, 1, 1, uintptr(unsafe.Pointer(&ev)), 0, 0); e != 0 {
		return fmt.Errorf("io_getevents: %w", e)
	}
	if ev.res < 0 {
		return syscall.Errno(-ev.res)
	}
	return nil
}

func (a *aioSync) close() {
	unix.Syscall(unix.SYS_IO_DESTROY, a.ctx, 0, 0)
	a.done.Close()
}
