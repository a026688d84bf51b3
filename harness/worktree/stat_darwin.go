package worktree

import "syscall"

// ctimeOf is a stat_t's change time: syscall names it Ctimespec here.
func ctimeOf(sys *syscall.Stat_t) (sec, nsec int64) {
	return int64(sys.Ctimespec.Sec), int64(sys.Ctimespec.Nsec)
}
