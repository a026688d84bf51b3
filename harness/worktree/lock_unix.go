//go:build linux || darwin

package worktree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// lockHome takes the lock of home, the folder a repository's forks live
// in, until unlock is called. Git reads every worktree's entry in the
// repository while it adds one, and fails ("failed to read
// .git/worktrees/<name>/commondir") on an entry another git is still
// writing or deleting: tine's own adds, prunes and removes of one
// repository's worktrees therefore go one at a time, across processes too
// (an flock on home/.tine-lock). It waits until ctx is done.
func lockHome(ctx context.Context, home string) (unlock func(), err error) {
	return lockIn(ctx, home, "another fork's worktree")
}

// LockRoot takes the lock of root, tine's folder of worktrees, until
// unlock is called: the commands that remove worktrees (gc, worktree rm
// and prune) hold it while they read which to remove and remove them, so
// that two never work on one worktree at once (one's commit of its work
// failing against the other's, or removing what the other still reads).
// It waits until ctx is done. A root that is not there holds nothing to
// remove: there is nothing to lock then.
func LockRoot(ctx context.Context, root string) (unlock func(), err error) {
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return func() {}, nil
	}
	return lockIn(ctx, root, "another tine removing worktrees")
}

// lockIn takes an flock on dir/.tine-lock, waiting for what holds it
// (said in the error when ctx ends first).
func lockIn(ctx context.Context, dir, holder string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("worktree: locking %s: %w", dir, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("worktree: waiting for %s in %s: %w", holder, dir, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// underLock runs fn holding home's lock when home is a folder of tine's
// (it holds the repository file makeHome writes) and the lock can be
// taken, else without it: home may be gone with the worktrees it held, and
// a folder that is not tine's never gets a lock file.
func underLock(ctx context.Context, home string, fn func() error) error {
	if _, err := os.Stat(filepath.Join(home, repoFile)); err == nil {
		if unlock, err := lockHome(ctx, home); err == nil {
			defer unlock()
		}
	}
	return fn()
}
