//go:build unix

package transfer

import "syscall"

const oNoFollow = syscall.O_NOFOLLOW
