// Package docker is the place that runs a fork's turns in a container of
// its own, on this machine's Docker daemon or another's (the Docker
// Engine API through github.com/moby/moby/client; never the docker
// command). Nothing of the person's machine is bind-mounted: the fork's
// starting files (its parent's commit, uncommitted changes and untracked
// files) go in through the API once per batch, as an image the batch's
// containers share; the session the fork branches, and only that one,
// goes in with its first turn; tine itself goes in and runs the agent's
// turn there (`tine __container`: Inside), reporting on the container's
// stdout. After each turn the fork's work comes back as its branch
// <branch>-fork-<i> in the person's repository (its commits, and its
// uncommitted work as a commit by tine), and the agent's session files
// come back beside tine's database. A container is stopped, not removed,
// between turns, so what a fork installed stays for its next.
package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"tine/harness"
	"tine/harness/place"
	"tine/harness/place/local"
	"tine/model"
)

// Store is what the place records through; *store.Store satisfies it.
type Store interface {
	place.Store
	SetContainer(ctx context.Context, id, container string) error
}

// Config is what a Docker place needs of tine.
type Config struct {
	Store Store
	// Agents are the backends, for their descriptors (harness.Carry).
	Agents *harness.Registry
	// Environ is this machine's environment, as tine was started with.
	Environ []string
	// DB is the database's path: containers carry a label naming it, and
	// forks' session files come back beside it (DB's folder/containers).
	DB string
	// WorktreeRoot is where tine keeps its worktrees of the repository:
	// forks' branch names are given out there (worktree.Reserve).
	WorktreeRoot string
	// Binary is the tine put into containers; "" is
	// TINE_CONTAINER_BINARY, else this program.
	Binary string
	// Say, when set, is told what takes a while (an image being made).
	Say func(string)
}

// Place is a Docker daemon as a place for forks' turns.
type Place struct {
	name string
	cfg  Config
	ep   Endpoint

	mu      sync.Mutex
	cli     *client.Client
	cliErr  error
	batches map[string]string // run id: its batch's image
	built   map[string]string // batch key: image
	reaped  sync.Once
}

// reapOnce stops, once a process, the containers of the database that run
// with no turn (Reap), before this process starts its own.
func (p *Place) reapOnce(ctx context.Context) {
	p.reaped.Do(func() { _, _ = p.Reap(ctx) })
}

var _ place.Place = (*Place)(nil)

// Kind is the places' kind: --on docker, --on docker:CONTEXT.
const Kind = "docker"

// New is the place name ("docker", or "docker:CONTEXT" for a docker
// context) as cfg configures it. The daemon is reached when first used.
func New(name string, cfg Config) (*Place, error) {
	kind, ctxName, _ := strings.Cut(name, ":")
	if kind != Kind {
		return nil, fmt.Errorf("docker: %q is not a docker place", name)
	}
	if cfg.Environ == nil {
		cfg.Environ = os.Environ()
	}
	ep, err := Resolve(ctxName, cfg.Environ)
	if err != nil {
		return nil, err
	}
	return &Place{name: name, cfg: cfg, ep: ep, batches: map[string]string{}, built: map[string]string{}}, nil
}

// Name implements place.Place.
func (p *Place) Name() string { return p.name }

// Endpoint is the daemon the place talks to.
func (p *Place) Endpoint() Endpoint { return p.ep }

// client is the daemon's client, connected once.
func (p *Place) client(ctx context.Context) (*client.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cli == nil && p.cliErr == nil {
		p.cli, p.cliErr = connect(ctx, p.ep, p.cfg.Environ)
	}
	return p.cli, p.cliErr
}

// Close lets go of the daemon.
func (p *Place) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cli != nil {
		return p.cli.Close()
	}
	return nil
}

// Client is the daemon's client (tine image build, gc).
func (p *Place) Client(ctx context.Context) (*client.Client, error) { return p.client(ctx) }

// agent is the descriptor of harness name, which must be able to run
// elsewhere than here.
func (p *Place) agent(name string) (harness.Agent, error) {
	ag, ok := p.cfg.Agents.Agent(name)
	if !ok {
		return harness.Agent{}, fmt.Errorf("docker: no harness %q", name)
	}
	if ag.Carry == nil {
		why := ag.NoCarry
		if why == "" {
			why = "tine does not know how to run it elsewhere"
		}
		return harness.Agent{}, fmt.Errorf("%s's forks cannot run in a container: %s", ag.Display, why)
	}
	return ag, nil
}

// DefaultImage is the image an agent's forks run in when no --image is
// given: what `tine image build AGENT` makes.
func DefaultImage(agent string) string { return "tine/" + agent + ":latest" }

func imageOf(run model.Run) string {
	if run.PlaceOpts.Image != "" {
		return run.PlaceOpts.Image
	}
	return DefaultImage(run.Harness)
}

// Admit implements place.Place: the parent's directory must be a git
// repository (the fork's files come from it and its work goes back to
// it), the daemon must answer, and the image must be there.
func (p *Place) Admit(ctx context.Context, parent model.Run, harnessName string, opts model.PlaceOpts, inPlace bool) (string, error) {
	if inPlace {
		return "", fmt.Errorf("a fork on %s has files of its own there; it cannot run in place", p.name)
	}
	dir, err := local.WorkDir(ctx, parent, false)
	if err != nil {
		return "", err
	}
	if _, err := p.agent(harnessName); err != nil {
		return "", err
	}
	cli, err := p.client(ctx)
	if err != nil {
		return "", err
	}
	if _, err := p.binary(ctx, cli); err != nil {
		return "", err
	}
	p.reapOnce(ctx)
	image := opts.Image
	if image == "" {
		image = DefaultImage(harnessName)
	}
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		if errdefs.IsNotFound(err) {
			if opts.Image != "" {
				return "", fmt.Errorf("there is no image %s on the Docker daemon at %s (pull or build it there first)", image, p.ep)
			}
			return "", fmt.Errorf("there is no image %s on the Docker daemon at %s: make one with `tine image build %s` (--offline needs no registry), or name yours with --image", image, p.ep, harnessName)
		}
		return "", fmt.Errorf("the image %s on %s: %w", image, p.ep, err)
	}
	return dir, nil
}

// binary is the tine that goes into containers: it must run on the
// daemon's system (Linux, this machine's architecture, unless
// TINE_CONTAINER_BINARY names another build).
func (p *Place) binary(ctx context.Context, cli *client.Client) (string, error) {
	if b := p.cfg.Binary; b != "" {
		return b, nil
	}
	if b := harness.Getenv(p.cfg.Environ, "TINE_CONTAINER_BINARY"); b != "" {
		return b, nil
	}
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "", fmt.Errorf("the Docker daemon at %s: %w", p.ep, err)
	}
	arch := map[string]string{"x86_64": "amd64", "aarch64": "arm64"}[info.Info.Architecture]
	if arch == "" {
		arch = info.Info.Architecture
	}
	if info.Info.OSType != "linux" || runtime.GOOS != "linux" || arch != runtime.GOARCH {
		return "", fmt.Errorf("the Docker daemon at %s runs %s/%s containers and this tine is a %s/%s program: set TINE_CONTAINER_BINARY to a tine built for %s/%s (GOOS=linux GOARCH=%s go build)",
			p.ep, info.Info.OSType, arch, runtime.GOOS, runtime.GOARCH, info.Info.OSType, arch, arch)
	}
	return os.Executable()
}

// dbKey names the database in containers' labels.
func (p *Place) dbKey() string { return DBKey(p.cfg.DB) }

// DBKey names the database at path in the labels of the containers and
// images its forks made.
func DBKey(path string) string {
	sum := sha256.Sum256([]byte(path))
	return hex.EncodeToString(sum[:8])
}

// Labels every container and image of tine's carries.
const (
	labelTine  = "tine"
	labelDB    = "tine.db"
	labelRun   = "tine.run"
	labelBatch = "tine.batch"
	labelRole  = "tine.role"
	labelKey   = "tine.key"
)

func (p *Place) labels(run model.Run, role string) map[string]string {
	l := map[string]string{labelTine: "1", labelDB: p.dbKey(), labelRole: role}
	if run.ID != "" {
		l[labelRun] = run.ID
	}
	if run.Batch != "" {
		l[labelBatch] = run.Batch
	}
	return l
}

// savedHome is where fork id's agent state comes back to, laid out as
// under its HOME in the container.
func (p *Place) savedHome(id string) string {
	return filepath.Join(filepath.Dir(p.cfg.DB), "containers", id, "home")
}

// Acquire implements place.Place: at most opts.Jobs containers of this
// tine's run at once on the daemon (default: its CPUs), counted across
// tine's processes on this machine.
func (p *Place) Acquire(ctx context.Context, run model.Run, queued func()) (func(), error) {
	jobs := run.PlaceOpts.Jobs
	if jobs <= 0 {
		cli, err := p.client(ctx)
		if err != nil {
			return nil, err
		}
		info, err := cli.Info(ctx, client.InfoOptions{})
		if err != nil {
			return nil, fmt.Errorf("the Docker daemon at %s: %w", p.ep, err)
		}
		jobs = max(info.Info.NCPU, 1)
	}
	return acquireSlot(ctx, filepath.Join(filepath.Dir(p.cfg.DB), "containers", "slots", p.ep.Key()), jobs, queued)
}

// Check implements place.Place: the check runs in the fork's container,
// on its files as its turns left them.
func (p *Place) Check(ctx context.Context, run model.Run, c model.Check, timeout time.Duration) model.Check {
	fail := func(err error) model.Check {
		return model.Check{Cmd: c.Cmd, Number: c.Number, Ran: true, Exit: -1, Error: err.Error()}
	}
	cli, err := p.client(ctx)
	if err != nil {
		return fail(err)
	}
	if run.Container == "" {
		return fail(fmt.Errorf("fork %s has no container to check in", run.Label()))
	}
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	end, err := p.job(ctx, cli, run, Job{Kind: JobCheck, Check: &c, TimeoutNS: int64(timeout)}, nil)
	switch {
	case err != nil:
		return fail(err)
	case end.Check == nil:
		return fail(errors.New(cmpOr(end.Err, "the container's tine gave no result")))
	}
	return *end.Check
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// drain reads r to its end and closes it.
func drain(r io.ReadCloser) {
	_, _ = io.Copy(io.Discard, r)
	r.Close()
}

// timings, when TINE_DOCKER_TIMINGS names a file, gets a JSON line for
// each phase of a fork's turn in its container as it ends (the batch's
// image, creating the container, its job, bringing the work back), for
// testdata/bench/containers.py. Nothing else reads it.
func (p *Place) timing(run model.Run, phase string, since time.Time) {
	file := harness.Getenv(p.cfg.Environ, "TINE_DOCKER_TIMINGS")
	if file == "" {
		return
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "{\"run\":%q,\"phase\":%q,\"start\":%.3f,\"seconds\":%.3f}\n", run.ID, phase,
		float64(since.UnixNano())/1e9, time.Since(since).Seconds())
}
