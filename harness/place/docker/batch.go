package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"tine/harness"
	"tine/harness/place"
	"tine/harness/worktree"
	"tine/model"
)

// startFile holds, in a batch's image, where its forks start: read by
// the container's tine on a fork's first turn and when it saves its work.
const startFile = tineDir + "/start.json"

// startState is what startFile holds.
type startState struct {
	Base   string `json:"base"`
	Staged string `json:"staged"`
	Work   string `json:"work"`
	// Top is the checkout's top in the container; Dir where the agent
	// works (the parent's cwd's place in it).
	Top string `json:"top"`
	Dir string `json:"dir"`
}

// Prepare implements place.Place: for forks that have no container yet,
// it reads what they start with (their parent's commit, uncommitted and
// untracked files, once per directory), gives each its branch in the
// person's repository, in order, and makes the batch's image holding
// those files once, for all of them.
func (p *Place) Prepare(ctx context.Context, runs []model.Run) {
	cli, err := p.client(ctx)
	if err != nil {
		return
	}
	p.reapOnce(ctx)
	starts := map[string]worktree.Start{}
	for _, run := range runs {
		if run.Container != "" || run.BaseCommit != "" {
			continue
		}
		key := run.Cwd
		if from, ok := place.FromElsewhere(ctx, p.cfg.Store, run); ok {
			key += "\x00" + from
		}
		st, ok := starts[key]
		if !ok {
			if st, err = p.snapshot(ctx, run); err != nil {
				continue // the fork's turn says why (Ready)
			}
			starts[key] = st
		}
		if err := p.reserve(ctx, &run, st); err != nil {
			continue
		}
		if image, err := p.batchImage(ctx, cli, run, st); err == nil {
			p.mu.Lock()
			p.batches[run.ID] = image
			p.mu.Unlock()
		}
	}
}

// snapshot is what fork run starts with: its directory's commit and
// uncommitted work, or, when its parent's files were elsewhere too, the
// parent's branch.
func (p *Place) snapshot(ctx context.Context, run model.Run) (worktree.Start, error) {
	from, ok := place.FromElsewhere(ctx, p.cfg.Store, run)
	if !ok {
		return worktree.Snapshot(ctx, run.Cwd)
	}
	top, _, err := worktree.Repo(ctx, run.Cwd)
	if err != nil {
		return worktree.Start{}, err
	}
	tip, err := worktree.Resolve(ctx, top, "refs/heads/"+from)
	if err != nil {
		return worktree.Start{}, err
	}
	st, err := p.startOf(ctx, run, tip, "")
	if err != nil {
		return st, err
	}
	if st.Work, err = worktree.Resolve(ctx, top, tip+"^{tree}"); err != nil {
		return st, err
	}
	st.Staged, st.Branch = st.Work, from
	return st, nil
}

// reserve gives fork run its branch at st's base and records it.
func (p *Place) reserve(ctx context.Context, run *model.Run, st worktree.Start) error {
	branch, err := worktree.Reserve(ctx, worktree.Spec{Source: run.Cwd, Root: p.cfg.WorktreeRoot, Branch: st.Branch}, st.Base)
	if err != nil {
		return fmt.Errorf("making the fork's branch in %s: %w", run.Cwd, err)
	}
	if err := p.cfg.Store.SetWorktree(context.WithoutCancel(ctx), run.ID, "", branch, st.Base, st.Work); err != nil {
		return err
	}
	run.Branch, run.BaseCommit, run.StartTree = branch, st.Base, st.Work
	return nil
}

// Ready implements place.Place: the fork's container, made from its
// batch's image on its first turn, or made again from its branch (and
// the agent's session files that came back) when it is gone.
func (p *Place) Ready(ctx context.Context, run *model.Run) (place.Workspace, error) {
	cli, err := p.client(ctx)
	if err != nil {
		return place.Workspace{}, err
	}
	if run.Container != "" {
		c, err := cli.ContainerInspect(ctx, run.Container, client.ContainerInspectOptions{})
		if err == nil {
			return place.Workspace{Dir: c.Container.Config.WorkingDir}, nil
		}
		if !errdefs.IsNotFound(err) {
			return place.Workspace{}, fmt.Errorf("fork %s's container: %w", run.Label(), err)
		}
		return p.remake(ctx, cli, run)
	}
	if run.NativeID != "" || run.OwnMessages > 0 {
		// It ran, and its container was removed (worktree prune, rm).
		return p.remake(ctx, cli, run)
	}
	if run.BaseCommit == "" {
		st, err := p.snapshot(ctx, *run)
		if err != nil {
			return place.Workspace{}, fmt.Errorf("the fork's directory: %w", err)
		}
		if err := p.reserve(ctx, run, st); err != nil {
			return place.Workspace{}, err
		}
		image, err := p.batchImage(ctx, cli, *run, st)
		if err != nil {
			return place.Workspace{}, err
		}
		return p.create(ctx, cli, run, image, st)
	}
	p.mu.Lock()
	image := p.batches[run.ID]
	p.mu.Unlock()
	st, err := p.startOf(ctx, *run, run.BaseCommit, run.StartTree)
	if err != nil {
		return place.Workspace{}, err
	}
	if image == "" {
		// Prepared by a process that is gone: the files it started
		// with, all of them unstaged.
		if image, err = p.batchImage(ctx, cli, *run, st); err != nil {
			return place.Workspace{}, err
		}
	}
	return p.create(ctx, cli, run, image, st)
}

// startOf is a fork's start at commit base with files work (staged as
// work), in its repository.
func (p *Place) startOf(ctx context.Context, run model.Run, base, work string) (worktree.Start, error) {
	top, _, err := worktree.Repo(ctx, run.Cwd)
	if err != nil {
		return worktree.Start{}, fmt.Errorf("fork %s's directory: %w", run.Label(), err)
	}
	st := worktree.Start{Top: top, Rel: ".", Base: base, Staged: work, Work: work}
	if rel, err := filepath.Rel(top, run.Cwd); err == nil && !strings.HasPrefix(rel, "..") {
		st.Rel = rel
	}
	if st.Work == "" {
		st.Work, st.Staged = base+"^{tree}", base+"^{tree}"
	}
	return st, nil
}

// remake makes fork run's container again, now that it is gone: its
// checkout at its branch (what came back after its last turn), the
// agent's session files as they came back, and notes that it did.
func (p *Place) remake(ctx context.Context, cli *client.Client, run *model.Run) (place.Workspace, error) {
	gone := func(err error) error {
		return fmt.Errorf("fork %s's container is gone and could not be made again from its branch %s: %w", run.Label(), run.Branch, err)
	}
	top, _, err := worktree.Repo(ctx, run.Cwd)
	if err != nil {
		return place.Workspace{}, gone(err)
	}
	tip, err := worktree.Resolve(ctx, top, "refs/heads/"+run.Branch)
	if err != nil {
		return place.Workspace{}, gone(err)
	}
	st, err := p.startOf(ctx, *run, tip, tip+"^{tree}")
	if err != nil {
		return place.Workspace{}, gone(err)
	}
	if st.Work, err = worktree.Resolve(ctx, top, tip+"^{tree}"); err != nil {
		return place.Workspace{}, gone(err)
	}
	st.Staged = st.Work
	image, err := p.batchImage(ctx, cli, *run, st)
	if err != nil {
		return place.Workspace{}, gone(err)
	}
	ws, err := p.create(ctx, cli, run, image, st)
	if err != nil {
		return ws, gone(err)
	}
	if err := p.sendHome(ctx, cli, *run); err != nil {
		return ws, gone(err)
	}
	_ = p.cfg.Store.AddNote(context.WithoutCancel(ctx), run.ID, "its container was gone; tine made it again from branch "+run.Branch)
	return ws, nil
}

// repoName is the folder a repository's checkout has in a container.
func repoName(top string) string {
	n := regexp.MustCompile(`[^A-Za-z0-9._-]+`).ReplaceAllString(filepath.Base(top), "-")
	if n == "" || n == "." || n == ".." {
		return "repo"
	}
	return n
}

// dirs is where a fork of st has its checkout in a container, and where
// its agent works.
func dirs(st worktree.Start) (top, dir string) {
	top = path.Join(workRoot, repoName(st.Top))
	return top, path.Join(top, filepath.ToSlash(st.Rel))
}

// batchImage is the image a batch's forks start from: the agent's image
// with tine, the files st starts with, and a shallow repository at its
// base, as one layer the batch's containers share. Made once per start,
// and found again by its key when it was made before.
func (p *Place) batchImage(ctx context.Context, cli *client.Client, run model.Run, st worktree.Start) (string, error) {
	bin, err := p.binary(ctx, cli)
	if err != nil {
		return "", err
	}
	base := imageOf(run)
	img, err := cli.ImageInspect(ctx, base)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return "", fmt.Errorf("there is no image %s on the Docker daemon at %s: make one with `tine image build %s`, or name yours with --image", base, p.ep, run.Harness)
		}
		return "", fmt.Errorf("the image %s: %w", base, err)
	}
	binKey, err := fileKey(bin)
	if err != nil {
		return "", fmt.Errorf("tine for the container (%s): %w", bin, err)
	}
	top, dir := dirs(st)
	sum := sha256.Sum256([]byte(strings.Join([]string{img.ID, st.Base, st.Staged, st.Work, top, dir, binKey}, "\n")))
	key := hex.EncodeToString(sum[:])[:20]
	ref := "tine-batch:" + key
	p.mu.Lock()
	done := p.built[key]
	p.mu.Unlock()
	if done != "" {
		return done, nil
	}
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		p.mu.Lock()
		p.built[key] = ref
		p.mu.Unlock()
		return ref, nil
	}
	if p.cfg.Say != nil {
		p.cfg.Say(fmt.Sprintf("copying the forks' starting files into an image on %s", p.ep))
	}
	defer p.timing(run, "copy in", time.Now())
	labels := p.labels(model.Run{Batch: run.Batch}, "batch")
	labels[labelKey] = key
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{Image: base,
		Cmd: []string{tineBin, InsideArg}, Labels: p.labels(model.Run{Batch: run.Batch}, "prep")}})
	if err != nil {
		return "", fmt.Errorf("making the batch's image from %s: %w", base, err)
	}
	defer removeLater(cli, c.ID)
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(p.writeLayer(ctx, pw, bin, st, top, dir))
	}()
	_, err = cli.CopyToContainer(ctx, c.ID, client.CopyToContainerOptions{DestinationPath: "/", Content: pr})
	pr.CloseWithError(err)
	if err != nil {
		return "", fmt.Errorf("copying the forks' starting files into the batch's image: %w", err)
	}
	cfg := img.Config
	out := &container.Config{Labels: labels, Cmd: []string{tineBin, InsideArg}}
	if cfg != nil {
		out.Env, out.Entrypoint = cfg.Env, nil
	}
	if _, err := cli.ContainerCommit(ctx, c.ID, client.ContainerCommitOptions{Reference: ref, Config: out,
		Comment: "tine: a batch's starting files"}); err != nil {
		return "", fmt.Errorf("making the batch's image: %w", err)
	}
	p.mu.Lock()
	p.built[key] = ref
	p.mu.Unlock()
	return ref, nil
}

// fileKey names a file's version: its size and modification time.
func fileKey(name string) (string, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %d %d", name, fi.Size(), fi.ModTime().UnixNano()), nil
}

// removeLater removes a container of tine's in the background: removing
// takes seconds, which nobody waits for.
func removeLater(cli *client.Client, id string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _ = cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	}()
}

// writeLayer writes the batch's layer as a tar stream: tine, what the
// forks start from (startFile), their files under top, and top/.git: a
// shallow repository at st.Base holding the objects of the files.
func (p *Place) writeLayer(ctx context.Context, w io.Writer, bin string, st worktree.Start, top, dir string) error {
	tw := tar.NewWriter(w)
	now := time.Now()
	mkdir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(name, "/") + "/", Mode: 0o755, ModTime: now})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(name, "/"), Mode: mode, Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{tineDir, outDir, sessionsDir, workRoot} {
		if err := mkdir(d); err != nil {
			return err
		}
	}
	if err := copyFileInto(tw, bin, strings.TrimPrefix(tineBin, "/"), 0o755, now); err != nil {
		return err
	}
	state, _ := json.Marshal(startState{Base: st.Base, Staged: st.Staged, Work: st.Work, Top: top, Dir: dir})
	if err := file(startFile, 0o644, state); err != nil {
		return err
	}
	// The files, as git archive writes them.
	ar, aw := io.Pipe()
	// However this returns, git archive is not left writing to no one.
	defer ar.Close()
	go func() {
		aw.CloseWithError(worktree.Archive(ctx, st.Top, st.Work, strings.TrimPrefix(top, "/")+"/", aw))
	}()
	tr := tar.NewReader(ar)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			ar.CloseWithError(err)
			return fmt.Errorf("the forks' files: %w", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		h.ModTime = now
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	// The repository: a shallow clone at Base.
	tmp, err := os.MkdirTemp("", "tine-batch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	trees := []string{st.Work}
	if st.Staged != "" && st.Staged != st.Work {
		trees = append(trees, st.Staged)
	}
	if err := worktree.Pack(ctx, st.Top, tmp, st.Base, trees...); err != nil {
		return fmt.Errorf("the forks' repository: %w", err)
	}
	g := top + "/.git"
	for _, d := range []string{g, g + "/refs", g + "/refs/heads", g + "/refs/tags", g + "/objects", g + "/objects/pack", g + "/objects/info", g + "/info"} {
		if err := mkdir(d); err != nil {
			return err
		}
	}
	for name, data := range map[string]string{
		g + "/HEAD":                  "ref: refs/heads/tine-start\n",
		g + "/refs/heads/tine-start": st.Base + "\n",
		g + "/shallow":               st.Base + "\n",
		g + "/config":                "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n",
		g + "/description":           "a fork's checkout, made by tine\n",
	} {
		if err := file(name, 0o644, []byte(data)); err != nil {
			return err
		}
	}
	packs, err := filepath.Glob(filepath.Join(tmp, "objects", "pack", "pack-*"))
	if err != nil {
		return err
	}
	for _, pk := range packs {
		// Streamed: a repository's pack is as big as its files.
		if err := copyFileInto(tw, pk, strings.TrimPrefix(g, "/")+"/objects/pack/"+filepath.Base(pk), 0o444, now); err != nil {
			return err
		}
	}
	return tw.Close()
}

// copyFileInto writes the file at host into tw as name, streaming it.
func copyFileInto(tw *tar.Writer, host, name string, mode int64, at time.Time) error {
	f, err := os.Open(host)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: fi.Size(), ModTime: at}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// create makes fork run's container from image, its checkout as st has
// it, with the agent's configuration (Carry.Config) copied in, and
// records it.
func (p *Place) create(ctx context.Context, cli *client.Client, run *model.Run, image string, st worktree.Start) (place.Workspace, error) {
	ag, err := p.agent(run.Harness)
	if err != nil {
		return place.Workspace{}, err
	}
	defer p.timing(*run, "create", time.Now())
	_, dir := dirs(st)
	o := run.PlaceOpts
	hc := &container.HostConfig{NetworkMode: container.NetworkMode(o.Network)}
	hc.Resources.NanoCPUs = int64(o.CPUs * 1e9)
	if o.MemoryBytes > 0 {
		hc.Resources.Memory, hc.Resources.MemorySwap = o.MemoryBytes, o.MemoryBytes
	}
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: "tine-" + run.ID,
		Config: &container.Config{Image: image, Cmd: []string{tineBin, InsideArg}, WorkingDir: dir,
			Env: []string{"HOME=" + home}, Labels: p.labels(*run, "fork"),
			OpenStdin: true, StdinOnce: true, AttachStdin: true, AttachStdout: true, AttachStderr: true},
		HostConfig: hc,
	})
	if err != nil {
		return place.Workspace{}, fmt.Errorf("making fork %s's container: %w", run.Label(), err)
	}
	if files := ag.Carry.Config(p.cfg.Environ); len(files) > 0 {
		if err := copyFiles(ctx, cli, c.ID, files); err != nil {
			removeLater(cli, c.ID)
			return place.Workspace{}, fmt.Errorf("copying %s's configuration into fork %s's container: %w", ag.Display, run.Label(), err)
		}
	}
	if err := p.cfg.Store.SetContainer(context.WithoutCancel(ctx), run.ID, c.ID); err != nil {
		removeLater(cli, c.ID)
		return place.Workspace{}, err
	}
	run.Container = c.ID
	return place.Workspace{Dir: dir}, nil
}

// copyFiles copies files of this machine into container id, each at
// HOME/Rel there, private to its user.
func copyFiles(ctx context.Context, cli *client.Client, id string, files []harness.CarriedFile) error {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		made := map[string]bool{}
		err := func() error {
			for _, f := range files {
				b, err := os.ReadFile(f.Host)
				if err != nil {
					return err
				}
				name := path.Join(strings.TrimPrefix(home, "/"), filepath.ToSlash(f.Rel))
				var parents []string
				for d := path.Dir(name); d != "." && d != "/" && !made[d]; d = path.Dir(d) {
					made[d] = true
					parents = append([]string{d}, parents...)
				}
				for _, d := range parents {
					if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o700, ModTime: time.Now()}); err != nil {
						return err
					}
				}
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: int64(len(b)), ModTime: time.Now()}); err != nil {
					return err
				}
				if _, err := tw.Write(b); err != nil {
					return err
				}
			}
			return tw.Close()
		}()
		pw.CloseWithError(err)
	}()
	_, err := cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/", Content: pr})
	pr.CloseWithError(err)
	return err
}
