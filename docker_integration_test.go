//go:build agents

package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"tine/harness/place/docker"
	"tine/harness/registry"
	"tine/internal/modelserver"
	"tine/internal/service"
	"tine/model"
	"tine/store"
)

// dockerOrSkip is the local Docker daemon as a place, skipping the test
// when none answers (.ci/run starts one).
func dockerOrSkip(t *testing.T) *docker.Place {
	t.Helper()
	p, err := docker.New("docker", docker.Config{Environ: os.Environ()})
	require.NoError(t, err)
	if _, err := p.Client(context.Background()); err != nil {
		t.Skipf("no Docker daemon to run forks in: %v (.ci/run starts dockerd)", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// agentImage makes sure the image agent name's forks run in is there,
// making it offline from the agent installed here when it is not (.ci/run
// makes them before the tests).
func agentImage(t *testing.T, p *docker.Place, name string) {
	t.Helper()
	bin := agentBin(t, name)
	cli, err := p.Client(context.Background())
	require.NoError(t, err)
	if _, err := cli.ImageInspect(context.Background(), docker.DefaultImage(name)); err == nil {
		return
	} else if !errdefs.IsNotFound(err) {
		require.NoError(t, err)
	}
	ag, ok := registry.Agent(name)
	require.True(t, ok)
	_, err = p.BuildImage(context.Background(), docker.Build{Agent: ag, Offline: true, Bin: bin}, func(s string) { t.Log(s) })
	require.NoError(t, err)
}

// gitOut runs git in dir and returns its output.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// TestDockerForksEndToEnd: three forks of a real Claude Code session run
// in containers of their own on the local daemon, best-of-N with a check
// run in each container, the best applied, a second turn in the same
// container; each fork's work comes back as its branch, and nothing of
// the person's machine was in reach.
func TestDockerForksEndToEnd(t *testing.T) {
	t.Parallel()
	p := dockerOrSkip(t)
	for _, name := range dockerAgents() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			agentImage(t, p, name)
			dockerForksEndToEnd(t, name)
		})
	}
}

func dockerForksEndToEnd(t *testing.T, name string) {
	// Uncommitted and untracked work the forks start with, as local
	// forks do; what must stay out of reach: the person's ssh key, a
	// secret in their environment.
	s := newDockerSetup(t, name, func(home, project string) {
		require.NoError(t, os.WriteFile(filepath.Join(project, "README.md"), []byte("a project, edited\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(project, "notes.txt"), []byte("untracked\n"), 0o644))
		require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "id_rsa"), []byte("PRIVATE-KEY-OF-THE-HOST\n"), 0o600))
	}, "GITHUB_TOKEN=ghp-host-secret-123")
	db, session, project, k, srv, on, a, sh := s.db, s.session, s.project, s.k, s.srv, s.on, s.a, s.sh
	var out, errOut string
	var code int

	for _, f := range []string{"good", "bad1", "bad2"} {
		on("write "+f, modelserver.Reply{Text: "Writing it.", ToolCalls: []modelserver.ToolCall{
			a.shell("echo x > " + f + ".txt; cat ~/.ssh/id_rsa; env | grep -c ghp- ; ls " + project + " " + filepath.Dir(db))}},
			modelserver.Reply{Text: "Wrote " + f + ".txt."})
	}
	start := time.Now()
	out, errOut, code = sh.tine(t, db, "fork", session, "--at", fmt.Sprint(k), "-n", "3", "--name", "good", "--name", "bad1", "--name", "bad2",
		"-m", "write good", "-m", "write bad1", "-m", "write bad2", "--check", "test -f good.txt", "--on", "docker", "--network", "host",
		"--wait", "--json", "--apply-best")
	t.Logf("three forks in containers: %s", time.Since(start))
	var res struct {
		Forks []forkJSON `json:"forks"`
	}
	if code != 0 {
		shown, _, _ := sh.tine(t, db, "show", "good")
		t.Logf("good:\n%s", shown)
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), "%s\n%s", out, errOut)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	require.Len(t, res.Forks, 3)
	for i, f := range res.Forks {
		require.Equal(t, "completed", f.Status, f.Error)
		assert.Equal(t, "docker", f.Place)
		assert.NotEmpty(t, f.Container)
		assert.Empty(t, f.Worktree, "no worktree here: its files are in its container")
		assert.Equal(t, fmt.Sprintf("main-fork-%d", i+1), f.Branch)
		// Its branch holds what it started with and what it wrote, and
		// not the others' files.
		files := gitOut(t, project, "ls-tree", "-r", "--name-only", f.Branch)
		assert.Contains(t, files, f.Name+".txt")
		assert.Contains(t, files, "notes.txt", "the untracked file it started with")
		for _, other := range []string{"good", "bad1", "bad2"} {
			if other != f.Name {
				assert.NotContains(t, files, other+".txt")
			}
		}
		assert.Equal(t, "a project, edited", gitOut(t, project, "show", f.Branch+":README.md"))
		require.NotNil(t, f.Check)
		assert.True(t, f.Check.Ran)
		assert.Equal(t, f.Name == "good", f.Best)
	}
	// The person's checkout is as it was but for the best fork's file,
	// applied; their repository has the forks' branches.
	assert.Equal(t, "M README.md\n?? good.txt\n?? notes.txt", gitOut(t, project, "status", "--short", "--untracked-files=all"))
	// --apply-best brought the best fork's file into the checkout.
	b, err := os.ReadFile(filepath.Join(project, "good.txt"))
	require.NoError(t, err, errOut)
	assert.Equal(t, "x\n", string(b))

	// Compare shows what each changed, from its branch.
	out, errOut, code = sh.tine(t, db, "compare", "good", "bad1", "--json")
	require.Equal(t, 0, code, errOut)
	var c comparison
	require.NoError(t, json.Unmarshal([]byte(out), &c))
	require.Len(t, c.Runs, 2)
	require.Len(t, c.Runs[0].Files, 1, out)
	assert.Equal(t, "good.txt", c.Runs[0].Files[0].Path)

	// What the forks' tools saw: no key of the host, no secret of its
	// environment, not the person's checkout.
	reqs := srv.ModelRequests()
	for _, r := range reqs {
		body := string(r.Body)
		assert.NotContains(t, body, "PRIVATE-KEY-OF-THE-HOST")
		assert.NotContains(t, body, "ghp-host-secret-123")
		assert.NotContains(t, body, "README.md\\nnotes.txt", "the person's checkout is out of reach")
		assert.NotContains(t, body, "t.db", "tine's files are out of reach")
	}

	// A second turn runs in the same container, in the fork's session.
	on("second-turn", modelserver.Reply{Text: "You asked me to write good."})
	out, errOut, code = sh.tine(t, db, "run", "good", "-m", "what did I ask? second-turn", "--wait", "--json")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, "good", res.Forks[0].Name)
	assert.Equal(t, "docker", res.Forks[0].Place, "a fork keeps where it ran")
	reqs = srv.ModelRequests()
	last := string(reqs[len(reqs)-1].Body)
	assert.Contains(t, last, "Wrote good.txt.", "the agent remembers the fork's first turn")
}

// dockerAgents are the agents whose forks TestDockerForksEndToEnd runs in
// containers: Claude Code and pi always; every agent with
// TINE_TEST_DOCKER_AGENTS=all.
func dockerAgents() []string {
	if os.Getenv("TINE_TEST_DOCKER_AGENTS") == "all" {
		return []string{"claude", "pi", "codex", "qwen", "gemini", "opencode"}
	}
	return []string{"claude", "pi"}
}

// claudeRunIn stores a run of Claude Code's, as an import would, that
// worked in a git repository of its own: a fork of it can be asked for
// without the agent or a daemon.
func claudeRunIn(t *testing.T, db string) (id, project string) {
	t.Helper()
	project = filepath.Join(t.TempDir(), "project")
	gitInit(t, project)
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	run := model.Run{Harness: "claude", NativeID: "6f6b1d2e-0000-4000-8000-000000000001", Cwd: project, Title: "a session"}
	msgs := []model.Message{
		{Role: model.User, NativeID: "u1", Parts: []model.Part{{Kind: model.Text, Text: "hello"}}},
		{Role: model.Assistant, NativeID: "a1", Parts: []model.Part{{Kind: model.Text, Text: "hi"}}},
	}
	require.NoError(t, st.CreateRun(context.Background(), &run, msgs))
	return run.ID, project
}

// TestDockerFaultsBeforeAnythingIsMade: a daemon that cannot be reached,
// or an image that is not there, is said in one sentence when the forks
// are asked for, and nothing is made: no fork, no branch.
func TestDockerFaultsBeforeAnythingIsMade(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "t.db")
	id, project := claudeRunIn(t, db)
	sock := filepath.Join(t.TempDir(), "nothing.sock")
	cases := []struct {
		name, host string
		args       []string
		want       string
	}{
		{"garbage", "not a daemon", nil, `"not a daemon" is not a Docker daemon's address (unix:///path, tcp://host:port or ssh://user@host)`},
		{"no daemon", "unix://" + sock, nil, "no Docker daemon answers at unix://" + sock + " (is it running?"},
		{"refused", "tcp://127.0.0.1:1", nil, "no Docker daemon answers at tcp://127.0.0.1:1"},
		{"ssh host silent", "ssh://nobody@127.0.0.1:1", nil, "the ssh host 127.0.0.1:1 does not answer"},
	}
	if p := dockerOrSkipQuiet(); p != nil {
		cases = append(cases, struct {
			name, host string
			args       []string
			want       string
		}{"no image", "", []string{"--image", "tine-test/no-such-image:1"}, "there is no image tine-test/no-such-image:1 on the Docker daemon at"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sh := asShell(nil)
			if c.host != "" {
				sh = sh.with("DOCKER_HOST=" + c.host)
			}
			if c.name == "ssh host silent" {
				home := t.TempDir()
				require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), nil, 0o600))
				writeSSHKey(t, filepath.Join(home, ".ssh", "id_ed25519"))
				sh = sh.with("HOME="+home, "SSH_AUTH_SOCK=")
			}
			args := append([]string{"fork", id, "-m", "hi", "--on", "docker", "--wait"}, c.args...)
			_, errOut, code := sh.tine(t, db, args...)
			assert.Equal(t, 1, code)
			assert.Contains(t, errOut, c.want)
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %s", errOut)
			out, _, _ := sh.tine(t, db, "ls", "--json")
			assert.Equal(t, 1, strings.Count(out, `"id"`), "no fork was made: %s", out)
			assert.Empty(t, gitOut(t, project, "branch", "--list", "main-fork-*"))
		})
	}
}

// dockerOrSkipQuiet is the local daemon when one answers, else nil.
func dockerOrSkipQuiet() *docker.Place {
	p, err := docker.New("docker", docker.Config{Environ: os.Environ()})
	if err != nil {
		return nil
	}
	if _, err := p.Client(context.Background()); err != nil {
		return nil
	}
	return p
}

// writeSSHKey writes a new unencrypted ed25519 key to file (and its
// public half to file.pub).
func writeSSHKey(t *testing.T, file string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKey(priv, "")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(block), 0o600))
	sp, err := ssh.NewPublicKey(pub)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file+".pub", ssh.MarshalAuthorizedKey(sp), 0o644))
}

// TestDockerPermissionDeniedSaysSo: a user who may not use the daemon's
// socket is told so in one sentence, and nothing is made. Run as nobody
// (root may use any socket), on this machine's daemon's socket.
func TestDockerPermissionDeniedSaysSo(t *testing.T) {
	t.Parallel()
	const sock = "/var/run/docker.sock"
	if os.Geteuid() != 0 {
		t.Skip("runs the command as nobody, which needs root")
	}
	if st, err := os.Stat(sock); err != nil || st.Mode().Perm()&0o006 != 0 {
		t.Skipf("no daemon socket closed to other users at %s", sock)
	}
	const nobody = 65534
	dir := t.TempDir()
	db := filepath.Join(dir, "t.db")
	id, project := claudeRunIn(t, db)
	bin := filepath.Join(t.TempDir(), "tine")
	self, err := os.Executable()
	require.NoError(t, err)
	copyFile(t, self, bin, 0o755)
	for _, p := range []string{dir, filepath.Dir(bin), project} {
		for d := p; d != filepath.Dir(d); d = filepath.Dir(d) {
			info, err := os.Stat(d)
			require.NoError(t, err)
			if info.Mode().Perm()&0o005 != 0o005 {
				require.NoError(t, os.Chmod(d, info.Mode().Perm()|0o055))
			}
		}
	}
	for _, top := range []string{dir, project} {
		require.NoError(t, filepath.WalkDir(top, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, nobody, nobody)
		}))
	}
	cmd := exec.Command(bin, "--db", db, "fork", id, "-m", "hi", "--on", "docker", "--wait")
	cmd.Env = []string{"TINE_TEST_AS_TINE=1", "HOME=" + dir, "PATH=" + os.Getenv("PATH"), "DOCKER_HOST=unix://" + sock}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var errOut strings.Builder
	cmd.Stderr = &errOut
	err = cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, errOut.String())
	assert.Equal(t, 1, ee.ExitCode())
	assert.Equal(t, "tine: permission denied on the Docker daemon at unix://"+sock+
		": this user may not use it (add it to the docker group, or point DOCKER_HOST at a daemon it may use)\n", errOut.String())
}

// dockerSetup is a real agent's session, imported, ready to fork in
// containers: its database, the session, the boundary after its first
// answer, the scripted server and its replies.
type dockerSetup struct {
	db, session, project string
	k                    int
	srv                  *modelserver.Server
	on                   func(marker string, rs ...modelserver.Reply)
	a                    e2eAgent
	// sh is the shell tine runs in: the agent's environment.
	sh shellEnv
}

func newDockerSetup(t *testing.T, name string, prepare func(home, project string), env ...string) *dockerSetup {
	t.Helper()
	srv := quietServer(t)
	home := t.TempDir()
	s := &dockerSetup{srv: srv, project: filepath.Join(home, "project"), on: replies(srv)}
	gitInit(t, s.project)
	if prepare != nil {
		prepare(home, s.project)
	}
	s.a = setupAgent(t, name, home, srv.URL())
	s.on("turn-one", modelserver.Reply{Text: "Hello; ready when you are."})
	s.on("turn-two", modelserver.Reply{Text: "Noted, turn two."})
	s.session = s.a.session(t)
	s.sh = asShell(append(s.a.env, env...), "CLAUDE_CONFIG_DIR", "CODEX_HOME", "PI_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR",
		"QWEN_HOME", "QWEN_RUNTIME_DIR", "GEMINI_CLI_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "OPENCODE_CONFIG")
	s.db = filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := s.sh.tine(t, s.db, "import", "--json")
	require.Equal(t, 0, code, errOut)
	out, errOut, code := s.sh.tine(t, s.db, "show", s.session, "--json")
	require.Equal(t, 0, code, errOut)
	var shown service.Show
	require.NoError(t, json.Unmarshal([]byte(out), &shown))
	for _, m := range shown.Transcript {
		if m.Role == "assistant" && strings.Contains(fmt.Sprint(m.Parts), "ready when you are") {
			s.k = m.K
		}
	}
	require.NotZero(t, s.k)
	return s
}

// fork forks the session once in a container with message msg and
// flags, waiting; it returns the fork as printed and the command's stderr.
func (s *dockerSetup) fork(t *testing.T, name, msg string, flags ...string) (forkJSON, string) {
	t.Helper()
	args := append([]string{"fork", s.session, "--at", fmt.Sprint(s.k), "--name", name, "-m", msg, "--on", "docker",
		"--network", "host", "--wait", "--json"}, flags...)
	out, errOut, _ := s.sh.tine(t, s.db, args...)
	var res struct {
		Forks []forkJSON `json:"forks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), "%s\n%s", out, errOut)
	require.Len(t, res.Forks, 1)
	return res.Forks[0], errOut
}

// TestDockerFaultsMidTurn: what goes wrong while a fork's turn runs in its
// container is said in one sentence, the fork is failed with it, and
// nothing is lost: what it streamed is kept, and its work comes back as
// its branch whenever its container still exists.
func TestDockerFaultsMidTurn(t *testing.T) {
	t.Parallel()
	p := dockerOrSkip(t)
	agentImage(t, p, "claude")
	s := newDockerSetup(t, "claude", nil)
	cli, err := p.Client(context.Background())
	require.NoError(t, err)

	t.Run("out of memory", func(t *testing.T) {
		s.on("remember-little", modelserver.Reply{Text: "never sent"})
		f, _ := s.fork(t, "small", "remember-little", "--memory", "24m")
		assert.Equal(t, "failed", f.Status)
		assert.Contains(t, f.Error, "fork small's container ran out of memory: its limit of 24 MiB (--memory)")

	})

	t.Run("container killed", func(t *testing.T) {
		s.on("work-slowly", modelserver.Reply{Text: "Working.", ToolCalls: []modelserver.ToolCall{
			s.a.shell("echo started > before.txt; sleep 60")}}, modelserver.Reply{Text: "never seen"})
		done := make(chan struct{})
		var f forkJSON
		go func() {
			defer close(done)
			f, _ = s.fork(t, "killed", "work-slowly")
		}()
		// Kill its container once its tool runs.
		id := waitForContainerOf(t, s.db, "killed", func(c string) bool { return fileIn(cli, c, "before.txt") })
		_, err := cli.ContainerKill(context.Background(), id, client.ContainerKillOptions{Signal: "KILL"})
		require.NoError(t, err)
		<-done
		assert.Equal(t, "failed", f.Status)
		assert.Contains(t, f.Error, "fork killed's container was killed mid-turn (exit status 137")
		assert.GreaterOrEqual(t, f.Messages, s.k+2, "what it streamed (its prompt, the tool call) is kept")
		// Its work came back all the same.
		assert.Equal(t, "started", gitOut(t, s.project, "show", f.Branch+":before.txt"))
	})

	t.Run("copy-out fails", func(t *testing.T) {
		s.on("write-one", modelserver.Reply{Text: "Writing.", ToolCalls: []modelserver.ToolCall{s.a.write("one.txt")}},
			modelserver.Reply{Text: "Wrote one."})
		f, errOut := s.fork(t, "held", "write-one")
		require.Equal(t, "completed", f.Status, f.Error+errOut)
		// The person checks the fork's branch out: its next turn's work
		// cannot move it, and says so; the work stays in the container.
		other := filepath.Join(t.TempDir(), "held")
		gitOut(t, s.project, "worktree", "add", "-q", other, f.Branch)
		s.on("write-two", modelserver.Reply{Text: "Writing.", ToolCalls: []modelserver.ToolCall{s.a.write("two.txt")}},
			modelserver.Reply{Text: "Wrote two."})
		out, errOut, code := s.sh.tine(t, s.db, "run", "held", "-m", "write-two", "--wait", "--json")
		assert.Equal(t, 1, code, out)
		assert.Contains(t, errOut, "copying its work out of container "+f.Container[:12])
		assert.Contains(t, errOut, "branch "+f.Branch+" is checked out in "+other+", so it was left as it is")
		assert.True(t, fileIn(cli, f.Container, "two.txt"), "the work stays in the container")
	})
}

// waitForContainerOf waits until fork name has a container for which ok
// holds, and returns it.
func waitForContainerOf(t *testing.T, db, name string, ok func(id string) bool) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		st, err := store.Open(db)
		require.NoError(t, err)
		r, err := st.Resolve(context.Background(), name)
		st.Close()
		if err == nil && r.Container != "" && ok(r.Container) {
			return r.Container
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("fork %s got no container in time", name)
	return ""
}

// fileIn reports whether the checkout in container id has file.
func fileIn(cli *client.Client, id, file string) bool {
	c, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil {
		return false
	}
	_, err = cli.ContainerStatPath(context.Background(), id, client.ContainerStatPathOptions{Path: c.Container.Config.WorkingDir + "/" + file})
	return err == nil
}

// TestDockerLifecycle: a container runs only while its fork's turn does:
// tine cancel and the death of the tine that ran the turn stop it, gc
// stops one running with no turn and removes one whose fork is gone, and
// worktree prune removes finished forks' containers once their work is
// back, a later turn making the container again from the branch.
func TestDockerLifecycle(t *testing.T) {
	t.Parallel()
	p := dockerOrSkip(t)
	agentImage(t, p, "claude")
	s := newDockerSetup(t, "claude", nil)
	cli, err := p.Client(context.Background())
	require.NoError(t, err)
	slow := func(marker string) {
		s.on(marker, modelserver.Reply{Text: "slow", Fault: &modelserver.Fault{Kind: modelserver.FaultDelay, Delay: 2 * time.Minute}})
	}
	asked := func(marker string) {
		require.Eventually(t, func() bool {
			for _, r := range s.srv.ModelRequests() {
				if strings.Contains(string(r.Body), marker) {
					return true
				}
			}
			return false
		}, 2*time.Minute, 100*time.Millisecond)
	}
	running := func(id string) bool {
		c, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
		return err == nil && c.Container.State != nil && c.Container.State.Running
	}
	resolve := func(name string) model.Run {
		st, err := store.Open(s.db)
		require.NoError(t, err)
		defer st.Close()
		r, err := st.Resolve(context.Background(), name)
		require.NoError(t, err)
		return r
	}
	background := func(name, marker string) {
		_, errOut, code := s.sh.tine(t, s.db, "fork", s.session, "--at", fmt.Sprint(s.k), "--name", name, "-m", marker,
			"--on", "docker", "--network", "host")
		require.Equal(t, 0, code, errOut)
		asked(marker)
	}

	t.Run("cancel", func(t *testing.T) {
		slow("cancel-me")
		background("c1", "cancel-me")
		c := resolve("c1").Container
		require.True(t, running(c))
		out, errOut, code := s.sh.tine(t, s.db, "cancel", "c1")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "c1: cancelled")
		assert.Equal(t, model.Cancelled, resolve("c1").Status)
		assert.Eventually(t, func() bool { return !running(c) }, time.Minute, 200*time.Millisecond, "its container stops")
	})

	var orphan model.Run
	t.Run("owner dies", func(t *testing.T) {
		slow("die-owner")
		background("o1", "die-owner")
		r := resolve("o1")
		require.True(t, running(r.Container))
		require.NotZero(t, r.OwnerPID)
		require.NoError(t, syscall.Kill(r.OwnerPID, syscall.SIGKILL))
		assert.Eventually(t, func() bool { return !running(r.Container) }, time.Minute, 200*time.Millisecond,
			"a container whose owner died stops (its job's stdin ended)")
		out, _, _ := s.sh.tine(t, s.db, "ls", "--json")
		orphan = resolve("o1")
		assert.Equal(t, model.Failed, orphan.Status, out)
		assert.Contains(t, orphan.Error, "interrupted")
	})

	t.Run("gc", func(t *testing.T) {
		require.NotEmpty(t, orphan.ID)
		key := docker.DBKey(s.db)
		mk := func(run string) string {
			c, err := cli.ContainerCreate(context.Background(), client.ContainerCreateOptions{Config: &container.Config{
				Image: docker.DefaultImage("claude"), Cmd: []string{"sleep", "300"},
				Labels: map[string]string{"tine": "1", "tine.db": key, "tine.role": "fork", "tine.run": run}}})
			require.NoError(t, err)
			_, err = cli.ContainerStart(context.Background(), c.ID, client.ContainerStartOptions{})
			require.NoError(t, err)
			t.Cleanup(func() { cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true}) })
			return c.ID
		}
		stray := mk(orphan.ID)         // running, its fork not
		gone := mk("0000000000000000") // its fork is no run of the store
		out, errOut, code := s.sh.tine(t, s.db, "gc", "--json")
		require.Equal(t, 0, code, errOut)
		var g gcJSON
		require.NoError(t, json.Unmarshal([]byte(out), &g), out)
		assert.GreaterOrEqual(t, g.Stopped, 1, out)
		assert.False(t, running(stray), "gc stopped the container running with no turn")
		assert.Contains(t, g.Containers, gone[:12]+" (its fork is gone)")
		_, err := cli.ContainerInspect(context.Background(), gone, client.ContainerInspectOptions{})
		assert.True(t, errdefs.IsNotFound(err), "gc removed the container of a fork that is gone")
		assert.NotContains(t, out, resolve("c1").Container[:12], "a fork's container the store holds stays")
	})

	t.Run("prune and make again", func(t *testing.T) {
		s.on("keep-this", modelserver.Reply{Text: "Writing.", ToolCalls: []modelserver.ToolCall{s.a.write("kept.txt")}},
			modelserver.Reply{Text: "Wrote kept.txt."})
		f, errOut := s.fork(t, "keep", "keep-this")
		require.Equal(t, "completed", f.Status, f.Error+errOut)
		out, errOut, code := s.sh.tine(t, s.db, "worktree", "prune")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "keep: removed its container "+f.Container[:12])
		_, err := cli.ContainerInspect(context.Background(), f.Container, client.ContainerInspectOptions{})
		assert.True(t, errdefs.IsNotFound(err), "prune removed it")
		assert.Empty(t, resolve("keep").Container)
		assert.Equal(t, "x", gitOut(t, s.project, "show", f.Branch+":kept.txt"), "its work stays on its branch")
		// Its next turn makes the container again, from its branch and
		// the agent's session as it came back.
		s.on("next-turn", modelserver.Reply{Text: "I wrote kept.txt before."})
		out, errOut, code = s.sh.tine(t, s.db, "run", "keep", "-m", "what did you write? next-turn", "--wait", "--json")
		require.Equal(t, 0, code, "%s\n%s", out, errOut)
		r := resolve("keep")
		assert.NotEmpty(t, r.Container)
		assert.NotEqual(t, f.Container, r.Container)
		assert.Contains(t, r.Note, "its container was gone; tine made it again from branch "+f.Branch)
		assert.True(t, fileIn(cli, r.Container, "kept.txt"), "the new container has its work")
		reqs := s.srv.ModelRequests()
		assert.Contains(t, string(reqs[len(reqs)-1].Body), "Wrote kept.txt.", "the agent remembers its first turn")
	})
}

// TestDockerRemoteDaemons: a daemon reached another way than its local
// socket runs forks the same: over tcp:// (a proxy to this machine's
// socket stands for a remote host's port), named by a docker context
// (--on docker:CONTEXT), and over ssh:// (this machine's sshd, on a port
// of its own, with a key and a known host of the test's).
func TestDockerRemoteDaemons(t *testing.T) {
	t.Parallel()
	p := dockerOrSkip(t)
	agentImage(t, p, "claude")
	const sock = "/var/run/docker.sock"
	if _, err := os.Stat(sock); err != nil {
		t.Skipf("the daemon's socket is not at %s", sock)
	}
	s := newDockerSetup(t, "claude", nil)
	tcp := proxyTo(t, sock)
	run := func(t *testing.T, name string, env map[string]string, on string) {
		sh := s.sh
		for k, v := range env {
			sh = sh.with(k + "=" + v)
		}
		s.on("remote-"+name, modelserver.Reply{Text: "Writing.", ToolCalls: []modelserver.ToolCall{s.a.write(name + ".txt")}},
			modelserver.Reply{Text: "Wrote it."})
		out, errOut, code := sh.tine(t, s.db, "fork", s.session, "--at", fmt.Sprint(s.k), "--name", name, "-m", "remote-"+name,
			"--on", on, "--network", "host", "--check", "test -f "+name+".txt", "--wait", "--json")
		require.Equal(t, 0, code, "%s\n%s", out, errOut)
		var res struct {
			Forks []forkJSON `json:"forks"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		f := res.Forks[0]
		assert.Equal(t, on, f.Place)
		assert.Equal(t, 0, f.Check.Exit, "the check ran in its container")
		assert.Equal(t, "x", gitOut(t, s.project, "show", f.Branch+":"+name+".txt"))
	}
	t.Run("tcp", func(t *testing.T) {
		run(t, "tcp", map[string]string{"DOCKER_HOST": "tcp://" + tcp}, "docker")
	})
	t.Run("context", func(t *testing.T) {
		cfg := t.TempDir()
		writeDockerContext(t, cfg, "far", "tcp://"+tcp)
		run(t, "ctx", map[string]string{"DOCKER_HOST": "", "DOCKER_CONFIG": cfg}, "docker:far")
	})
	t.Run("ssh", func(t *testing.T) {
		host := startSSHD(t)
		run(t, "ssh", map[string]string{"DOCKER_HOST": "ssh://" + host.user + "@" + host.addr, "HOME": host.home, "SSH_AUTH_SOCK": ""}, "docker")
	})
}

// proxyTo serves a TCP port on loopback that carries each connection to
// the Unix socket sock, and returns its address.
func proxyTo(t *testing.T, sock string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("unix", sock)
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{}, 2)
				go func() { io.Copy(u, c); u.(*net.UnixConn).CloseWrite(); done <- struct{}{} }()
				go func() { io.Copy(c, u); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
				<-done
				<-done
			}()
		}
	}()
	return l.Addr().String()
}

// writeDockerContext writes context name, for the daemon at host, as the
// docker CLI keeps contexts in the config folder cfg.
func writeDockerContext(t *testing.T, cfg, name, host string) {
	t.Helper()
	sum := sha256.Sum256([]byte(name))
	dir := filepath.Join(cfg, "contexts", "meta", hex.EncodeToString(sum[:]))
	require.NoError(t, os.MkdirAll(dir, 0o700))
	meta := fmt.Sprintf(`{"Name":%q,"Metadata":{},"Endpoints":{"docker":{"Host":%q,"SkipTLSVerify":false}}}`, name, host)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "meta.json"), []byte(meta), 0o600))
}

type sshHost struct{ addr, user, home string }

// startSSHD runs this machine's sshd on a port of its own for the test:
// its host key, one authorized key, whose private half is in home/.ssh
// with the host's key in known_hosts.
func startSSHD(t *testing.T) sshHost {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
			t.Skip("no sshd here (Debian: openssh-server)")
		}
		sshd = "/usr/sbin/sshd"
	}
	u, err := user.Current()
	require.NoError(t, err)
	dir := t.TempDir()
	home := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	writeSSHKey(t, filepath.Join(home, ".ssh", "id_ed25519"))
	writeSSHKey(t, filepath.Join(dir, "host_key"))
	auth, err := os.ReadFile(filepath.Join(home, ".ssh", "id_ed25519.pub"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "authorized_keys"), auth, 0o600))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	cfg := filepath.Join(dir, "sshd_config")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf("Port %s\nListenAddress 127.0.0.1\nHostKey %s\nAuthorizedKeysFile %s\n"+
		"PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nStrictModes no\n"+
		"AllowStreamLocalForwarding yes\nUsePAM no\nPidFile %s\n", port, filepath.Join(dir, "host_key"),
		filepath.Join(dir, "authorized_keys"), filepath.Join(dir, "sshd.pid"))), 0o600))
	require.NoError(t, os.MkdirAll("/run/sshd", 0o755))
	cmd := exec.Command(sshd, "-D", "-e", "-f", cfg)
	var logs strings.Builder
	cmd.Stderr = &logs
	// Its sessions hold its stderr too: they go with it, as a group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if t.Failed() {
			t.Logf("sshd said:\n%s", logs.String())
		}
	})
	hostPub, err := os.ReadFile(filepath.Join(dir, "host_key.pub"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"),
		[]byte(fmt.Sprintf("[127.0.0.1]:%s %s", port, hostPub)), 0o600))
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "sshd listens: %s", &logs)
	return sshHost{addr: addr, user: u.Username, home: home}
}

// TestDockerRecordKeepsTheKeyHere: a fork recorded in a container (a
// daemon of this machine, the host's network) calls tine's gateway with
// its run's key: its tools see no real key, the model API gets the real
// one, and the fork's calls are its tape.
func TestDockerRecordKeepsTheKeyHere(t *testing.T) {
	t.Parallel()
	p := dockerOrSkip(t)
	agentImage(t, p, "claude")
	// A secret of the kind the agent's environment holds, which nothing
	// overrides in the container: it must stay here too.
	s := newDockerSetup(t, "claude", nil, "ANTHROPIC_API_KEY=real-secret-key-42", "ANTHROPIC_EXTRA_TOKEN=real-secret-token-42")
	s.on("record-me", modelserver.Reply{Text: "Looking.", ToolCalls: []modelserver.ToolCall{s.a.shell("env | grep -i -e key -e token || true")}},
		modelserver.Reply{Text: "Looked."})
	before := len(s.srv.ModelRequests())
	f, errOut := s.fork(t, "rec", "record-me", "--record")
	require.Equal(t, "completed", f.Status, f.Error+errOut)
	reqs := s.srv.ModelRequests()[before:]
	require.NotEmpty(t, reqs)
	for _, r := range reqs {
		assert.Equal(t, "real-secret-key-42", r.Header.Get("X-Api-Key"), "the gateway called the API with the real key")
		assert.NotContains(t, string(r.Body), "real-secret-key-42", "the fork's tools never saw it")
		assert.NotContains(t, string(r.Body), "real-secret-token-42", "the fork's tools never saw it")
	}
	st, err := store.Open(s.db)
	require.NoError(t, err)
	defer st.Close()
	tape, err := st.Tape(context.Background(), f.ID)
	require.NoError(t, err)
	assert.Len(t, tape, 2, "its two calls are its tape")
}

// TestDockerQueuesBeyondJobs: with --jobs 1 the second fork's container
// waits for the first's, queued (its status says so), and both finish.
func TestDockerQueuesBeyondJobs(t *testing.T) {
	t.Parallel()
	p := dockerOrSkip(t)
	agentImage(t, p, "claude")
	s := newDockerSetup(t, "claude", nil)
	for range 2 {
		s.on("one-at-a-time", modelserver.Reply{Text: "Slowly.", Fault: &modelserver.Fault{Kind: modelserver.FaultDelay, Delay: 10 * time.Second}})
	}
	done := make(chan string, 1)
	go func() {
		out, errOut, _ := s.sh.tine(t, s.db, "fork", s.session, "--at", fmt.Sprint(s.k), "-n", "2", "--name", "q1", "--name", "q2",
			"-m", "one-at-a-time", "--on", "docker", "--network", "host", "--jobs", "1", "--wait", "--json")
		done <- out + errOut
	}()
	queued := false
	for !queued {
		select {
		case out := <-done:
			t.Fatalf("both ended before one was seen queued: %s", out)
		case <-time.After(100 * time.Millisecond):
		}
		out, _, _ := s.sh.tine(t, s.db, "ls", "--json")
		queued = strings.Contains(out, `"status": "queued"`)
	}
	out := <-done
	assert.Equal(t, 2, strings.Count(out, `"status": "completed"`), out)
}

// TestDockerImageWithoutTheAgent: an image that lacks the fork's agent
// fails the fork saying so.
func TestDockerImageWithoutTheAgent(t *testing.T) {
	t.Parallel()
	p := dockerOrSkip(t)
	agentImage(t, p, "claude")
	agentImage(t, p, "pi")
	s := newDockerSetup(t, "claude", nil)
	f, _ := s.fork(t, "noagent", "hello there", "--image", docker.DefaultImage("pi"))
	assert.Equal(t, "failed", f.Status)
	assert.Contains(t, f.Error, `claude is not installed (no "claude" in PATH)`)
}

// TestDockerForkOfAContainerFork: a fork of a fork that ran in a
// container starts from that fork's work (its branch), not from the
// checkout, whether it runs in a container too or here in a worktree.
func TestDockerForkOfAContainerFork(t *testing.T) {
	t.Parallel()
	p := dockerOrSkip(t)
	agentImage(t, p, "claude")
	s := newDockerSetup(t, "claude", nil)
	s.on("write-parent", modelserver.Reply{Text: "Writing.", ToolCalls: []modelserver.ToolCall{s.a.write("parent.txt")}},
		modelserver.Reply{Text: "Wrote parent.txt."})
	parent, errOut := s.fork(t, "boxed", "write-parent")
	require.Equal(t, "completed", parent.Status, parent.Error+errOut)
	for _, c := range []struct{ name, on string }{{"inner", "docker"}, {"outer", "local"}} {
		s.on("write-"+c.name, modelserver.Reply{Text: "Writing.", ToolCalls: []modelserver.ToolCall{s.a.write(c.name + ".txt")}},
			modelserver.Reply{Text: "Wrote it."})
		args := []string{"fork", "boxed", "--name", c.name, "-m", "write-" + c.name, "--on", c.on, "--wait", "--json"}
		if c.on == "docker" {
			args = append(args, "--network", "host")
		}
		out, errOut, code := s.sh.tine(t, s.db, args...)
		require.Equal(t, 0, code, "%s\n%s", out, errOut)
		var res struct {
			Forks []forkJSON `json:"forks"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		f := res.Forks[0]
		assert.True(t, strings.HasPrefix(f.Branch, parent.Branch+"-fork-"), "%s is named after its parent's branch", f.Branch)
		files := gitOut(t, s.project, "ls-tree", "-r", "--name-only", f.Branch)
		if f.Worktree != "" {
			b, _ := exec.Command("git", "-C", f.Worktree, "status", "--short", "--untracked-files=all").Output()
			files += "\n" + string(b)
			_, err := os.Stat(filepath.Join(f.Worktree, "parent.txt"))
			assert.NoError(t, err, "the worktree has its parent's work")
		}
		assert.Contains(t, files, "parent.txt", "%s starts from its parent's work", c.name)
		assert.Contains(t, files, c.name+".txt")
	}
}

// TestDockerOpenInItsContainer: tine open (the TUI's o) on a fork that
// ran in a container opens its agent there, on this terminal (tmux):
// the person sees its session, talks to it, and when the agent exits the
// work it did comes back as the fork's branch.
// Claude Code's first start in the container (its connection check, the
// key and the folder's trust) is answered for it (Carry.Opening).
func TestDockerOpenInItsContainer(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("needs tmux")
	}
	t.Parallel()
	for _, name := range []string{"claude", "pi"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dockerOpen(t, name)
		})
	}
}

func dockerOpen(t *testing.T, name string) {
	p := dockerOrSkip(t)
	agentImage(t, p, name)
	s := newDockerSetup(t, name, nil)
	s.on("write-first", modelserver.Reply{Text: "Writing.", ToolCalls: []modelserver.ToolCall{s.a.write("first.txt")}},
		modelserver.Reply{Text: "Wrote the first file."})
	f, errOut := s.fork(t, "boxed", "write-first")
	require.Equal(t, "completed", f.Status, f.Error+errOut)

	openAndTalk(t, s, "boxed", func() {
		// Its container is in use: a turn through tine is refused,
		// saying so, and never reaches the open agent's terminal.
		_, errOut, code := s.sh.tine(t, s.db, "run", "boxed", "-m", "not now", "--wait")
		assert.NotEqual(t, 0, code)
		assert.Contains(t, errOut, "is in use")
	})
	// What the agent did there is the fork's branch now.
	files := gitOut(t, s.project, "ls-tree", "-r", "--name-only", f.Branch)
	assert.Contains(t, files, "first.txt")
	assert.Contains(t, files, "opened.txt", "the work done in the opened agent came back")
}

// openAndTalk opens fork with tine open in tmux, as a person would: the
// agent shows the fork's session (its first answer), takes a message
// whose scripted answer writes opened.txt with its tool, and exits.
// meanwhile runs while it is open. The tmux server, this test's own,
// starts in the setup's shell, and its session has that environment.
func openAndTalk(t *testing.T, s *dockerSetup, fork string, meanwhile func()) {
	sock := fmt.Sprintf("tine-open-%d-%d", os.Getpid(), rand.IntN(1e6))
	tmux := func(args ...string) string {
		cmd := exec.Command("tmux", append([]string{"-L", sock}, args...)...)
		cmd.Env = s.sh
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "tmux %v: %s", args, out)
		return string(out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", sock, "kill-server").Run() })
	line := "env TINE_TEST_AS_TINE=1 TERM=xterm-256color " + os.Args[0] + " --db " + s.db + " open " + fork + "; echo OPEN-EXITED $?; sleep 120"
	tmux("new-session", "-d", "-s", "o", "-x", "120", "-y", "35", line)
	waitFor := func(text string, within time.Duration) string {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			sc := tmux("capture-pane", "-p", "-J", "-t", "o")
			if strings.Contains(sc, text) {
				return sc
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q never showed; the screen:\n%s", text, sc)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// The agent in the container shows the fork's session.
	waitFor("Wrote the first file.", 90*time.Second)
	if meanwhile != nil {
		meanwhile()
	}
	s.on("open-turn", modelserver.Reply{Text: "Writing.", ToolCalls: []modelserver.ToolCall{s.a.write("opened.txt")}},
		modelserver.Reply{Text: "Opened and wrote it."})
	tmux("send-keys", "-t", "o", "-l", "open-turn: write another")
	time.Sleep(300 * time.Millisecond)
	tmux("send-keys", "-t", "o", "Enter")
	waitFor("Opened and wrote it.", 90*time.Second)
	for _, k := range []string{"C-c", "C-c", "C-d"} {
		if strings.Contains(tmux("capture-pane", "-p", "-J", "-t", "o"), "OPEN-EXITED") {
			break
		}
		tmux("send-keys", "-t", "o", k)
		time.Sleep(500 * time.Millisecond)
	}
	sc := waitFor("OPEN-EXITED", 60*time.Second)
	t.Logf("the terminal after:\n%s", sc)
	assert.Contains(t, sc, "OPEN-EXITED 0")
}

// TestOpenHereInItsWorktree: tine open on a fork that ran here opens its
// agent in the fork's worktree, on this terminal.
func TestOpenHereInItsWorktree(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("needs tmux")
	}
	s := newDockerSetup(t, "pi", nil)
	s.on("write-first", modelserver.Reply{Text: "Writing.", ToolCalls: []modelserver.ToolCall{s.a.write("first.txt")}},
		modelserver.Reply{Text: "Wrote the first file."})
	out, errOut, code := s.sh.tine(t, s.db, "fork", s.session, "--at", fmt.Sprint(s.k), "--name", "here", "-m", "write-first", "--wait", "--json")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	var res struct {
		Forks []forkJSON `json:"forks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.NotEmpty(t, res.Forks[0].Worktree)
	openAndTalk(t, s, "here", nil)
	_, err := os.Stat(filepath.Join(res.Forks[0].Worktree, "opened.txt"))
	assert.NoError(t, err, "the agent worked in the fork's worktree")
	_, err = os.Stat(filepath.Join(s.project, "opened.txt"))
	assert.True(t, os.IsNotExist(err), "and not in the checkout")
}
