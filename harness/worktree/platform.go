package worktree

// The build stops here on a system tine does not support, with one
// message (see internal/platform): a snapshot reads a file's inode and
// change time (stat_linux.go, stat_darwin.go).
import _ "tine/internal/platform"
