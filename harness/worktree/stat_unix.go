//go:build linux || darwin

package worktree

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// statOf is info's stat data as git's index holds it.
func statOf(info fs.FileInfo) gitStat {
	st := gitStat{mode: gitMode(info), size: uint32(info.Size())}
	m := info.ModTime()
	st.mtimeS, st.mtimeN = uint32(m.Unix()), uint32(m.Nanosecond())
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		sec, nsec := ctimeOf(sys)
		st.ctimeS, st.ctimeN, st.ino = uint32(sec), uint32(nsec), uint32(sys.Ino)
	}
	return st
}

// fstatat is the stat data of name in the folder open as fd (a symlink
// itself, not followed), and its kind: fs.ModeDir, 0 (a regular file),
// fs.ModeSymlink, or fs.ModeIrregular.
func fstatat(fd int, name string) (gitStat, fs.FileMode, error) {
	var sys unix.Stat_t // Ctim and Mtim on Linux and macOS alike
	if err := unix.Fstatat(fd, name, &sys, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return gitStat{}, 0, err
	}
	st := gitStat{ctimeS: uint32(sys.Ctim.Sec), ctimeN: uint32(sys.Ctim.Nsec), mtimeS: uint32(sys.Mtim.Sec),
		mtimeN: uint32(sys.Mtim.Nsec), ino: uint32(sys.Ino), size: uint32(sys.Size)}
	return withKind(st, uint32(sys.Mode))
}
