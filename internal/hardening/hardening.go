// Package hardening holds small process-level protections kici's
// long-running processes apply to themselves at startup.
package hardening

// NoDump marks the calling process non-dumpable (Linux
// prctl(PR_SET_DUMPABLE, 0), see prctl(2) and proc(5)): its
// /proc/<pid>/environ, /proc/<pid>/mem, /proc/<pid>/maps and similar
// entries become owned by root and unreadable to other processes of the
// same non-root user, ptrace attach by them is refused, and no core dump
// is written. Children regain the default on execve, so steps the process
// starts are unaffected.
//
// It does not stop root (or a process with CAP_SYS_PTRACE): when the
// process runs as root, everything on the host can still read it. On
// systems other than Linux it does nothing and returns nil. The error is
// the prctl failure, if any.
func NoDump() error { return noDump() }

// Dumpable reports the calling process's dumpable flag (Linux
// PR_GET_DUMPABLE); it is true on other systems.
func Dumpable() (bool, error) { return dumpable() }
