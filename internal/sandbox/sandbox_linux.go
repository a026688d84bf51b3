package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// bwrapArgs are the jail's fixed options: no network (a network namespace
// of its own, whose loopback is its own), no other process to see or
// signal (a pid namespace, and /proc of its own), no System V IPC with
// the machine, no capabilities even when tine runs as root, the whole file
// system read-only, a /dev of its own, and the jail killed with tine.
var bwrapArgs = []string{
	"--die-with-parent", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--cap-drop", "ALL",
	"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
}

var probe struct {
	once sync.Once
	bin  string
	err  error
}

// Available is nil when programs can be jailed here: bwrap is installed
// and makes its namespaces (it cannot in some containers). It is checked
// once, by running /bin/true in a jail.
func Available() error {
	probe.once.Do(func() {
		bin, err := exec.LookPath("bwrap")
		if err != nil {
			probe.err = fmt.Errorf("%w: bubblewrap (bwrap) is not installed (Debian and Ubuntu: apt-get install bubblewrap)", ErrUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		args := append(append([]string(nil), bwrapArgs...), "--", "/bin/true")
		if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
			probe.err = fmt.Errorf("%w: bwrap cannot make its namespaces here (%v: %s)", ErrUnavailable, err, strings.TrimSpace(string(out)))
			return
		}
		probe.bin = bin
	})
	return probe.err
}

func (s *Spec) command(relay, bin string, args []string, dir string, env []string) (string, []string, []string, error) {
	argv := append([]string(nil), bwrapArgs...)
	paths := append([]string(nil), s.Writable...)
	if s.TmpDir != "" {
		paths = append(paths, s.TmpDir)
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			continue
		}
		argv = append(argv, "--bind", p, p)
	}
	if dir != "" {
		argv = append(argv, "--chdir", dir)
	}
	argv = append(argv, "--", relay, RelayArg, s.Socket, strconv.Itoa(s.Port), "--", bin)
	return probe.bin, append(argv, args...), env, nil
}
