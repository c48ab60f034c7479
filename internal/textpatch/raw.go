package textpatch

import (
	"errors"
	"io"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The system calls that a stop of the program makes while its threads
// are stopped are raw (unix.RawSyscall6): they return in microseconds,
// and a goroutine in an ordinary one may lose its P to the runtime's
// sysmon, and wait for one on its return while the tracer's other
// goroutines hold every P. trace, whose reader and collector run
// meanwhile, had a stop of Caddy write 5 functions in 24.4 ms that way,
// the program stopped throughout. The waits for a thread to stop sleep
// in nanosleep, an ordinary one.

// rawSyscall is unix.RawSyscall6, again where a signal interrupted it.
func rawSyscall(trap, a1, a2, a3, a4, a5, a6 uintptr) (uintptr, error) {
	for {
		r, _, e := unix.RawSyscall6(trap, a1, a2, a3, a4, a5, a6)
		switch {
		case e == unix.EINTR:
			continue
		case e != 0:
			return r, e
		}
		return r, nil
	}
}

// pread and pwrite read and write all of b at off in the file fd: a
// process's memory, /proc/PID/mem.
func pread(fd uintptr, b []byte, off int64) error {
	return transfer(unix.SYS_PREAD64, fd, b, off, io.ErrUnexpectedEOF)
}

func pwrite(fd uintptr, b []byte, off int64) error {
	return transfer(unix.SYS_PWRITE64, fd, b, off, io.ErrShortWrite)
}

// transfer is pread or pwrite (trap), whose error is short where it
// moved fewer bytes than b has.
func transfer(trap, fd uintptr, b []byte, off int64, short error) error {
	if len(b) == 0 {
		return nil
	}
	n, err := rawSyscall(trap, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(off), 0, 0)
	if err == nil && int(n) != len(b) {
		err = short
	}
	return err
}

// processVMReadv is unix.ProcessVMReadv, raw.
func processVMReadv(pid int, local []unix.Iovec, remote []unix.RemoteIovec) (int, error) {
	if len(local) == 0 || len(remote) == 0 {
		return 0, errors.New("nothing to read")
	}
	n, err := rawSyscall(unix.SYS_PROCESS_VM_READV, uintptr(pid), uintptr(unsafe.Pointer(&local[0])), uintptr(len(local)), uintptr(unsafe.Pointer(&remote[0])), uintptr(len(remote)), 0)
	return int(n), err
}

// ptrace makes a ptrace request, raw.
func ptrace(req int, tid int, addr, data uintptr) error {
	_, err := rawSyscall(unix.SYS_PTRACE, uintptr(req), uintptr(tid), addr, data, 0, 0)
	return err
}

// wait4 is unix.Wait4 of one thread, with WNOHANG (which never blocks),
// raw.
func wait4(tid int, ws *unix.WaitStatus, options int) (int, error) {
	n, err := rawSyscall(unix.SYS_WAIT4, uintptr(tid), uintptr(unsafe.Pointer(ws)), uintptr(options|unix.WNOHANG), 0, 0, 0)
	return int(n), err
}
