package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// acquireSlot takes one of n slots in dir (a file each, held with an
// flock, so that tine's processes on this machine count together and a
// process that dies lets go of its slot), waiting for one to be free:
// queued is called once when it has to wait. The release closes the file.
func acquireSlot(ctx context.Context, dir string, n int, queued func()) (func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("docker: the slots of its daemon: %w", err)
	}
	waited := false
	for delay := 50 * time.Millisecond; ; delay = min(delay*2, time.Second) {
		for i := range n {
			f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(i)), os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				return nil, fmt.Errorf("docker: the slots of its daemon: %w", err)
			}
			if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
				return func() { f.Close() }, nil
			}
			f.Close()
		}
		if !waited && queued != nil {
			queued()
		}
		waited = true
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
	}
}
