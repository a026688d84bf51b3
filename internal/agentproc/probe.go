package agentproc

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"
)

// What an agent's CLI says of itself (its --version, an ACP agent's
// initialize) is asked once per version of its file, in this process:
// asking starts the CLI (a node start, seconds on a busy machine), and
// the answer changes only when the file does. A caller waits a while; the
// probe goes on without it, and its answer is kept for the next caller.

// probeKey is one question to one version of a file.
type probeKey struct {
	path, what  string
	size, mtime int64
}

// probe is one question's answer, once done is closed.
type probe struct {
	done chan struct{}
	out  string
	err  error
}

var probes = struct {
	mu sync.Mutex
	m  map[probeKey]*probe
}{m: map[probeKey]*probe{}}

// probeFor is how long a probe may run, whoever waits for it.
const probeFor = time.Minute

// Probed returns what ask said of the file at path (what names the
// question), asking it only when no answer for this version of the file
// (its size and modification time) is kept or being asked for. It waits
// at most wait, and while ctx lasts: past wait its error wraps
// context.DeadlineExceeded (the file took too long to answer, which says
// nothing of whether it works) and ask goes on, its answer kept. ask gets
// a context of its own, which ends after probeFor.
func Probed(ctx context.Context, path, what string, wait time.Duration, ask func(context.Context) (string, error)) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	key := probeKey{path: path, what: what, size: st.Size(), mtime: st.ModTime().UnixNano()}
	probes.mu.Lock()
	p := probes.m[key]
	if p == nil {
		p = &probe{done: make(chan struct{})}
		probes.m[key] = p
		go func() {
			defer close(p.done)
			ctx, cancel := context.WithTimeout(context.Background(), probeFor)
			defer cancel()
			p.out, p.err = ask(ctx)
		}()
	}
	probes.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-p.done:
		return p.out, p.err
	case <-t.C:
		return "", fmt.Errorf("no answer within %s (it is still asked, and its answer kept): %w", wait, context.DeadlineExceeded)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
