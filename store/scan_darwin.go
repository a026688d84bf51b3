package store

import (
	"os"
	"syscall"
)

// inodeAndCtime is the file's inode and change time in nanoseconds (0, 0
// when info holds no stat_t), for dbState.
func inodeAndCtime(info os.FileInfo) (ino, ctime int64) {
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		return int64(sys.Ino), sys.Ctimespec.Nano()
	}
	return 0, 0
}
