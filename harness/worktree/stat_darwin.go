package worktree

import (
	"io/fs"
	"syscall"
)

// statOf is info's stat data as git's index holds it.
func statOf(info fs.FileInfo) gitStat {
	st := gitStat{mode: gitMode(info), size: uint32(info.Size())}
	m := info.ModTime()
	st.mtimeS, st.mtimeN = uint32(m.Unix()), uint32(m.Nanosecond())
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		st.ctimeS, st.ctimeN, st.ino = uint32(sys.Ctimespec.Sec), uint32(sys.Ctimespec.Nsec), uint32(sys.Ino)
	}
	return st
}
