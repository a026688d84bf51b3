package docker

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"tine/harness"
	"tine/harness/worktree"
	"tine/internal/jsonl"
	"tine/model"
)

// stopGrace is how long a cancelled job has, once its stdin is closed,
// to stop its agent and save the fork's work before its container is
// killed.
const stopGrace = 30 * time.Second

// Turn implements place.Place: the turn runs in the fork's container
// (Inside), its events coming back as they happen; then the fork's work
// comes back as its branch and the agent's session files beside tine's
// database.
func (p *Place) Turn(ctx context.Context, h harness.Harness, req harness.TurnRequest, emit func(harness.Event)) error {
	run := req.Run
	cli, err := p.client(ctx)
	if err != nil {
		return err
	}
	ag, err := p.agent(run.Harness)
	if err != nil {
		return err
	}
	if req.ModelURL != "" && (!p.ep.Local() || run.PlaceOpts.Network != "host") {
		return fmt.Errorf("recording a fork's model calls needs its container to reach tine's gateway on this machine's loopback: a daemon on this machine and --network host (this one is %s, network %q)",
			p.ep, cmpOr(run.PlaceOpts.Network, "the daemon's default"))
	}
	env := ag.Carry.Env(p.cfg.Environ)
	if req.ModelURL != "" {
		// Recorded: the agent gets its run's key for tine's gateway
		// (req.ModelKey); the real keys stay here, with the gateway.
		env = withoutSecrets(env)
	}
	job := Job{Kind: JobTurn, Harness: run.Harness, Env: append(env, gitIdentity(ctx, run.Cwd)...),
		Start: &Start{Branch: run.Branch}, Label: run.Label()}
	r := req
	r.Sandbox = nil
	r.Run.Cwd, r.Run.Worktree, r.Run.Source = req.Dir, "", ""
	if req.Origin != nil {
		o := *req.Origin
		if job.Session, err = p.sessionFile(ctx, ag, o); err != nil {
			return err
		}
		o.Source = ""
		r.Origin = &o
	}
	job.Request = &r
	began := time.Now()
	end, err := p.job(ctx, cli, run, job, emit)
	p.timing(run, "turn", began)
	if err == nil && end.Err != "" {
		// An agent the kernel killed for the container's memory says only
		// that it was killed.
		if c, ierr := cli.ContainerInspect(context.WithoutCancel(ctx), run.Container, client.ContainerInspectOptions{}); ierr == nil &&
			c.Container.State != nil && c.Container.State.OOMKilled {
			end.Err = fmt.Sprintf("%s (%s)", end.Err, outOfMemory(run))
		}
	}
	// What the agent did comes back whatever became of the turn.
	began = time.Now()
	if berr := p.bringBack(ctx, cli, run, ag, end); berr != nil {
		err = errors.Join(err, berr)
	}
	p.timing(run, "copy out", began)
	switch {
	case err != nil:
		return err
	case end.Cancelled:
		return context.Canceled
	case end.Err != "":
		return errors.New(end.Err)
	}
	return nil
}

// withoutSecrets is env without the variables whose names say they hold
// a secret (a key, a token, a password).
func withoutSecrets(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		up := strings.ToUpper(k)
		if strings.Contains(up, "KEY") || strings.Contains(up, "TOKEN") || strings.Contains(up, "SECRET") ||
			strings.Contains(up, "PASSWORD") || strings.Contains(up, "AUTH") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// gitIdentity is who the person is to git in dir, for the commits an
// agent makes in a container, where their git configuration is not.
func gitIdentity(ctx context.Context, dir string) []string {
	var env []string
	for key, vars := range map[string][]string{"user.name": {"GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"}, "user.email": {"GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"}} {
		cmd := exec.CommandContext(ctx, "git", "config", "--get", key)
		cmd.Dir = dir
		if out, err := cmd.Output(); err == nil && strings.TrimSpace(string(out)) != "" {
			for _, v := range vars {
				env = append(env, v+"="+strings.TrimSpace(string(out)))
			}
		}
	}
	return env
}

// sessionFile is the origin session's file as its agent keeps it on this
// machine, or, for a session of a fork that ran in a container, as it
// came back from there: only that session goes in.
func (p *Place) sessionFile(ctx context.Context, ag harness.Agent, o harness.Origin) (*SessionFile, error) {
	environ := p.cfg.Environ
	src := o.Source
	if orun, err := p.cfg.Store.Run(ctx, o.RunID); err == nil && orun.Place != "" {
		environ, src = []string{"HOME=" + p.savedHome(orun.ID)}, ""
	}
	if src == "" {
		var err error
		if src, err = ag.Carry.Locate(environ, o.Session); err != nil {
			return nil, fmt.Errorf("the session the fork branches: %w", err)
		}
	}
	if db, id, ok := strings.Cut(src, "#"); ok && ag.Sessions != nil && ag.Sessions.Database != nil {
		data, err := ag.Sessions.Database.Read(ctx, db, id)
		if err != nil {
			return nil, fmt.Errorf("the session the fork branches (%s): %w", src, err)
		}
		return &SessionFile{Name: id + ".json", Data: data}, nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return nil, fmt.Errorf("the session the fork branches: %w", err)
	}
	return &SessionFile{Name: filepath.Base(src), Data: data}, nil
}

// job starts fork run's container, gives it job and hands its events to
// emit until it ends. Cancelling ctx closes the job's stdin, which stops
// it (it saves the fork's work first); one that does not stop within
// stopGrace is killed. The error says what became of the container when
// the job did not end by itself (killed, out of memory, the daemon gone).
func (p *Place) job(ctx context.Context, cli *client.Client, run model.Run, job Job, emit func(harness.Event)) (*End, error) {
	bg := context.WithoutCancel(ctx)
	id := run.Container
	started := time.Now()
	att, wait, err := p.startAttached(bg, cli, run)
	if err != nil {
		return nil, err
	}
	defer att.Close()
	if job.Kind == JobTurn {
		p.timing(run, "start", started)
	}
	if err := sendJob(att, run, job); err != nil {
		return nil, err
	}
	// Cancelled: the job's stdin ends, and after the grace the container.
	stopped := make(chan struct{})
	defer close(stopped)
	var cancelled bool
	var mu sync.Mutex
	go func() {
		select {
		case <-stopped:
			return
		case <-ctx.Done():
		}
		mu.Lock()
		cancelled = true
		mu.Unlock()
		_ = att.CloseWrite()
		select {
		case <-stopped:
		case <-time.After(stopGrace):
			_, _ = cli.ContainerKill(bg, id, client.ContainerKillOptions{Signal: "KILL"})
		}
	}()
	outR, outW := io.Pipe()
	stderr := &tailBuffer{max: 4 << 10}
	go func() {
		_, err := stdcopy.StdCopy(outW, stderr, att.Reader)
		outW.CloseWithError(err)
	}()
	var end *End
	lr := jsonl.NewReader(outR, 256<<20)
	for lr.Next() {
		var l Line
		if lr.Line().TooLong || json.Unmarshal(lr.Line().Text, &l) != nil {
			continue
		}
		switch {
		case l.End != nil:
			end = l.End
		case l.Event != nil && emit != nil:
			emit(l.Event.event())
		}
	}
	lr.Close()
	outR.Close()
	var status container.WaitResponse
	var waitErr error
	select {
	case status = <-wait.Result:
	case waitErr = <-wait.Error:
	case <-time.After(stopGrace):
		waitErr = errors.New("it did not stop")
	}
	if end != nil {
		return end, nil
	}
	mu.Lock()
	wasCancelled := cancelled
	mu.Unlock()
	if wasCancelled {
		return &End{Cancelled: true}, nil
	}
	return nil, p.died(bg, cli, run, status, waitErr, stderr.String())
}

// startAttached starts fork run's stopped container attached to its
// stdin, stdout and stderr, with a wait for its exit. A container runs
// one job at a time: starting a running one would hand a job's line to
// the one attached (an open agent's terminal), so that is refused.
func (p *Place) startAttached(ctx context.Context, cli *client.Client, run model.Run) (client.ContainerAttachResult, client.ContainerWaitResult, error) {
	id := run.Container
	var none client.ContainerWaitResult
	if c, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err == nil && c.Container.State != nil && c.Container.State.Running {
		return client.ContainerAttachResult{}, none, fmt.Errorf("fork %s's container %s is in use (its agent is open, or another tine runs its turn): try again when it stops", run.Label(), shortID(id))
	}
	att, err := cli.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return att, none, fmt.Errorf("fork %s's container: %w", run.Label(), err)
	}
	wait := cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		att.Close()
		return att, none, fmt.Errorf("starting fork %s's container: %w", run.Label(), err)
	}
	return att, wait, nil
}

// sendJob gives a started container's tine its job: one JSON line.
func sendJob(att client.ContainerAttachResult, run model.Run, job Job) error {
	line, err := json.Marshal(job)
	if err != nil {
		return err
	}
	if _, err := att.Conn.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("fork %s's container: %w", run.Label(), err)
	}
	return nil
}

// died says why fork run's container stopped before its job ended.
func (p *Place) died(ctx context.Context, cli *client.Client, run model.Run, status container.WaitResponse, waitErr error, stderr string) error {
	said := ""
	if s := strings.TrimSpace(stderr); s != "" {
		said = ": " + model.OneLine(s, 300)
	}
	c, err := cli.ContainerInspect(ctx, run.Container, client.ContainerInspectOptions{})
	switch {
	case err != nil && errdefs.IsNotFound(err):
		return fmt.Errorf("fork %s's container was removed mid-turn%s", run.Label(), said)
	case err != nil:
		return fmt.Errorf("the Docker daemon at %s went away mid-turn (%v); what the fork streamed is kept", p.ep, err)
	case c.Container.State != nil && c.Container.State.OOMKilled:
		return fmt.Errorf("%s; what it streamed is kept", outOfMemory(run))
	case waitErr != nil:
		return fmt.Errorf("fork %s's container stopped mid-turn (the Docker daemon: %v)%s", run.Label(), waitErr, said)
	case status.StatusCode == 137 || status.StatusCode == 143:
		return fmt.Errorf("fork %s's container was killed mid-turn (exit status %d: the daemon restarted, or someone stopped it)%s", run.Label(), status.StatusCode, said)
	}
	return fmt.Errorf("fork %s's container ended without finishing its turn (exit status %d)%s", run.Label(), status.StatusCode, said)
}

// outOfMemory says that fork run's container ran out of memory, and
// what its limit was.
func outOfMemory(run model.Run) string {
	limit := "the memory the daemon has"
	if run.PlaceOpts.MemoryBytes > 0 {
		limit = fmt.Sprintf("its limit of %s (--memory)", bytesText(run.PlaceOpts.MemoryBytes))
	}
	return fmt.Sprintf("fork %s's container ran out of memory: %s", run.Label(), limit)
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// bringBack brings what fork run did in its container back: its work as
// its branch, the agent's session files beside tine's database. When the
// turn ended without saving the work (its container was stopped), the
// container is started once more to save it.
func (p *Place) bringBack(ctx context.Context, cli *client.Client, run model.Run, ag harness.Agent, end *End) error {
	bg := context.WithoutCancel(ctx)
	if _, err := cli.ContainerInspect(bg, run.Container, client.ContainerInspectOptions{}); err != nil {
		return fmt.Errorf("its work could not be copied out: %w", err)
	}
	if end == nil || (!end.Saved && !end.Unchanged) {
		saved, err := p.job(bg, cli, run, Job{Kind: JobSave, Label: run.Label()}, nil)
		switch {
		case err != nil:
			return fmt.Errorf("its work could not be saved for copying out (%v); it stays in container %s", err, shortID(run.Container))
		case saved.SaveErr != "":
			return fmt.Errorf("its work could not be saved for copying out (%s); it stays in container %s", saved.SaveErr, shortID(run.Container))
		}
		end = saved
	}
	var errs []error
	if err := p.copyWork(bg, cli, run, end); err != nil {
		errs = append(errs, fmt.Errorf("copying its work out of container %s: %w (it stays there)", shortID(run.Container), err))
	}
	if err := p.copySessions(bg, cli, run, ag); err != nil {
		errs = append(errs, fmt.Errorf("copying %s's session files out of container %s: %w", ag.Display, shortID(run.Container), err))
	}
	return errors.Join(errs...)
}

func shortID(id string) string { return ShortID(id) }

// ShortID is a container's id as docker shows it: its first 12 digits.
func ShortID(id string) string { return id[:min(len(id), 12)] }

// copyWork points the fork's branch at its work: the bundle's tip, or the
// commit it is at still.
func (p *Place) copyWork(ctx context.Context, cli *client.Client, run model.Run, end *End) error {
	if end.Unchanged {
		return worktree.SetBranch(ctx, run.Cwd, run.Branch, end.Commit)
	}
	if end.SaveErr != "" {
		return errors.New(end.SaveErr)
	}
	tmp, err := os.MkdirTemp("", "tine-out-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	file := filepath.Join(tmp, "work.bundle")
	if err := copyOut(ctx, cli, run.Container, outDir+"/work.bundle", func(h *tar.Header, r io.Reader) error {
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Create(file)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}); err != nil {
		return err
	}
	_, err = worktree.Unbundle(ctx, run.Cwd, file, outRef, run.Branch)
	return err
}

// copyOut reads path of container id as the API gives it (a tar stream),
// handing each entry to fn.
func copyOut(ctx context.Context, cli *client.Client, id, from string, fn func(*tar.Header, io.Reader) error) error {
	res, err := cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: from})
	if err != nil {
		return err
	}
	defer drain(res.Content)
	tr := tar.NewReader(res.Content)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(h, tr); err != nil {
			return err
		}
	}
}

// copySessions copies the agent's state folders (Carry.State) out of the
// fork's container into savedHome, replacing what came out before.
func (p *Place) copySessions(ctx context.Context, cli *client.Client, run model.Run, ag harness.Agent) error {
	saved := p.savedHome(run.ID)
	for _, dir := range ag.Carry.State {
		from := path.Join(home, filepath.ToSlash(dir))
		if _, err := cli.ContainerStatPath(ctx, run.Container, client.ContainerStatPathOptions{Path: from}); err != nil {
			continue // the agent made none
		}
		into := filepath.Join(saved, filepath.Dir(dir))
		if err := os.MkdirAll(into, 0o700); err != nil {
			return err
		}
		next := filepath.Join(saved, dir+".tine-new")
		_ = os.RemoveAll(next)
		err := copyOut(ctx, cli, run.Container, from, func(h *tar.Header, r io.Reader) error {
			// Entries are "<base of from>/...": put them under next.
			rel := strings.TrimPrefix(path.Clean(h.Name), path.Base(from))
			if strings.Contains(rel, "..") {
				return nil
			}
			to := filepath.Join(next, filepath.FromSlash(rel))
			switch h.Typeflag {
			case tar.TypeDir:
				return os.MkdirAll(to, 0o700)
			case tar.TypeReg:
				if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
					return err
				}
				f, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
				if err != nil {
					return err
				}
				_, err = io.Copy(f, r)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				return err
			}
			return nil // links and devices are not sessions
		})
		if err != nil {
			_ = os.RemoveAll(next)
			return err
		}
		old := filepath.Join(saved, dir)
		_ = os.RemoveAll(old)
		if err := os.Rename(next, old); err != nil {
			return err
		}
	}
	return nil
}

// sendHome copies the agent state that came back from fork run's last
// container into its new one.
func (p *Place) sendHome(ctx context.Context, cli *client.Client, run model.Run) error {
	saved := p.savedHome(run.ID)
	var files []harness.CarriedFile
	err := filepath.WalkDir(saved, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(saved, p)
		files = append(files, harness.CarriedFile{Host: p, Rel: rel})
		return nil
	})
	if err != nil || len(files) == 0 {
		return err
	}
	return copyFiles(ctx, cli, run.Container, files)
}
