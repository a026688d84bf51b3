package worktree

import "syscall"

// ctimeOf is a stat_t's change time: syscall names it Ctim here.
func ctimeOf(sys *syscall.Stat_t) (sec, nsec int64) {
	return int64(sys.Ctim.Sec), int64(sys.Ctim.Nsec)
}
