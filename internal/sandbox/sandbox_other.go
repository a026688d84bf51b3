//go:build !linux

package sandbox

import (
	"fmt"
	"runtime"
)

// Available says there is no sandbox here: tine jails programs with
// bubblewrap, on Linux only.
func Available() error {
	return fmt.Errorf("%w on %s: tine's sandbox is bubblewrap, on Linux", ErrUnavailable, runtime.GOOS)
}

func (s *Spec) command(relay, bin string, args []string, dir string, env []string) (string, []string, []string, error) {
	return "", nil, nil, Available()
}
