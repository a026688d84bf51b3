//go:build agents

package main

import (
	"bytes"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/modelserver"
)

// TestRecordedTurnsKeepSecretsOffCommandLines is rule 13 of
// ARCHITECTURE.md for every agent tine records: while a recorded turn of
// the real CLI runs, the command line of every process it starts (what
// any user of the machine reads in /proc/PID/cmdline) holds neither a
// real key nor the key the gateway gave the run, and a gateway URL found
// on one opens nothing: a request through it without the run's key is
// refused, never reaching the model nor the tape.
func TestRecordedTurnsKeepSecretsOffCommandLines(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"claude", "codex", "pi", "qwen", "gemini", "opencode", "acp"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			secretsOffCommandLines(t, name)
		})
	}
}

func secretsOffCommandLines(t *testing.T, name string) {
	srv := quietServer(t)
	home := t.TempDir()
	project := filepath.Join(home, "project")
	gitInit(t, project)
	agent := name
	var extra []string
	if name == "acp" {
		acpBin, claudeExe := claudeBehindACP(t)
		agent, extra = "claude", []string{"TINE_ACP_AGENT=" + acpBin, "CLAUDE_CODE_EXECUTABLE=" + claudeExe}
	}
	a := setupAgent(t, agent, home, srv.URL())
	// Real keys no test uses elsewhere, so any sight of one is a leak.
	real := "tine-real-key-" + name + "-4f0c9e2a71"
	a.env = append(a.env, realKeyVar[agent]+"="+real, "GITHUB_TOKEN=tine-real-token-0b7d3f")
	on := replies(srv)
	on("turn-one", modelserver.Reply{Text: "Hello."})
	on("turn-two", modelserver.Reply{Text: "Noted."})
	session := a.session(t)
	sh := asShell(append(a.env, extra...), "CLAUDE_CONFIG_DIR", "IS_SANDBOX")
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := sh.tine(t, db, "import")
	require.Equal(t, 0, code, errOut)

	on("argv-probe", modelserver.Reply{Text: "Looking.", ToolCalls: []modelserver.ToolCall{a.shell("sleep 1; echo looked")}},
		modelserver.Reply{Text: "Looked."})
	args := []string{"--db", db, "fork", session, "--name", "probe", "-m", "argv-probe: look", "--record", "--wait", "--json"}
	if name == "acp" {
		args = append(args, "--harness", "acp", "--handoff")
	}
	// tine runs in a process of its own (the test binary as tine), whose
	// descendants are this test's only: other tests run side by side in
	// this one.
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = sh.with("TINE_TEST_AS_TINE=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	spy := spyOnChildren(t, cmd.Process.Pid, srv.URL())
	err := cmd.Wait()
	spy.stop()
	require.NoError(t, err, "%s\n%s", stdout.String(), stderr.String())
	_, tape := tapeOf(t, db, "probe")

	cmdlines, secrets, probes := spy.result()
	bin, _ := filepath.EvalSymlinks(a.bin)
	saw := false
	for _, c := range cmdlines {
		saw = saw || strings.Contains(c, a.bin) || (bin != "" && strings.Contains(c, bin)) || strings.Contains(c, filepath.Base(a.bin))
	}
	require.True(t, saw, "the agent's process was seen: %q", cmdlines)
	gwKey := false
	for _, s := range secrets {
		gwKey = gwKey || strings.HasPrefix(s, "tine-gw-")
	}
	require.True(t, gwKey, "the gateway's key for the run was found in the agent's environment")
	if name == "codex" {
		require.NotEmpty(t, probes, "Codex's command line holds the gateway's URL, which was tried")
	}
	secrets = append(secrets, real, "tine-real-token-0b7d3f")
	for _, c := range cmdlines {
		for _, s := range secrets {
			assert.NotContains(t, c, s, "a secret on a command line")
		}
	}
	for u, status := range probes {
		assert.Contains(t, []int{http.StatusUnauthorized, http.StatusNotFound}, status, "a request to %s without the run's key", u)
	}
	for _, r := range srv.Requests() {
		assert.False(t, strings.Contains(string(r.Body), "from nobody"), "the model got a request made without the run's key")
	}
	for _, s := range tape {
		assert.False(t, strings.Contains(s.Response+*s.Request, "from nobody"), "step %d of the tape is a request made without the run's key", s.Step)
	}
	assert.Equal(t, 2, len(tape), "the turn's two model calls are its tape")
	// Nor is any key in the database or its log.
	files, _ := filepath.Glob(db + "*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, s := range secrets {
			assert.False(t, bytes.Contains(b, []byte(s)), "%s holds a secret", f)
		}
	}
}

// realKeyVar is the variable each agent's real key is in, which tine
// forwards its recorded calls with (setupAgent's model server).
var realKeyVar = map[string]string{"claude": "ANTHROPIC_API_KEY", "codex": "TINE_TEST_API_KEY", "pi": "TINE_TEST_API_KEY",
	"qwen": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY", "opencode": "TINE_TEST_API_KEY"}

// childSpy watches the processes a tine process starts (its
// descendants), as any user of the machine can: their command lines. It also reads their
// environments, as only their owner can, to learn the keys they were
// given, and tries every loopback URL a command line shows.
type childSpy struct {
	root    int    // the tine process
	skip    string // the model server's host:port, not the gateway
	done    chan struct{}
	stopped chan struct{}

	mu       sync.Mutex
	parents  map[int]int
	cmdlines map[string]bool
	secrets  map[string]bool
	probes   map[string]int
}

func spyOnChildren(t *testing.T, root int, modelURL string) *childSpy {
	u, _ := url.Parse(modelURL)
	s := &childSpy{root: root, skip: u.Host, done: make(chan struct{}), stopped: make(chan struct{}), parents: map[int]int{},
		cmdlines: map[string]bool{}, secrets: map[string]bool{}, probes: map[string]int{}}
	go func() {
		defer close(s.stopped)
		for {
			s.scan()
			select {
			case <-s.done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *childSpy) stop() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	<-s.stopped
}

func (s *childSpy) result() (cmdlines, secrets []string, probes map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.cmdlines {
		cmdlines = append(cmdlines, c)
	}
	for k := range s.secrets {
		secrets = append(secrets, k)
	}
	return cmdlines, secrets, s.probes
}

// ppid is pid's parent, from /proc/PID/stat; 0 when it is gone.
func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

var loopbackURL = regexp.MustCompile(`https?://(?:127\.0\.0\.1|localhost|\[::1\]):[0-9]+[^\s"',]*`)

func (s *childSpy) scan() {
	self := s.root
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		mine := false
		for p, hops := pid, 0; p > 1 && hops < 64; hops++ {
			pp, ok := s.parents[p]
			if !ok {
				pp = ppid(p)
				s.parents[p] = pp
			}
			if pp == self {
				mine = true
				break
			}
			p = pp
		}
		if !mine {
			continue
		}
		dir := "/proc/" + e.Name()
		raw, err := os.ReadFile(dir + "/cmdline")
		if err != nil || len(raw) == 0 {
			continue
		}
		cmdline := strings.Join(strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"), " ")
		environ, _ := os.ReadFile(dir + "/environ")
		s.mu.Lock()
		s.cmdlines[cmdline] = true
		for _, kv := range strings.Split(string(environ), "\x00") {
			k, v, _ := strings.Cut(kv, "=")
			if (strings.HasSuffix(k, "_KEY") || strings.HasSuffix(k, "_TOKEN")) && len(v) >= 8 {
				s.secrets[v] = true
			}
		}
		var try []string
		for _, u := range loopbackURL.FindAllString(cmdline, -1) {
			if _, done := s.probes[u]; !done && !strings.Contains(u, s.skip) {
				s.probes[u] = 0
				try = append(try, u)
			}
		}
		s.mu.Unlock()
		for _, u := range try {
			status := probe(u)
			s.mu.Lock()
			s.probes[u] = status
			s.mu.Unlock()
		}
	}
}

// probe is what another user does with a URL read off a command line: a
// model call through it, without a key. It returns the status that is
// not a refusal, if any path gave one.
func probe(base string) int {
	base = strings.TrimRight(base, "/")
	status := http.StatusNotFound
	for _, p := range []string{"/responses", "/chat/completions", "/messages", "/v1/messages",
		"/v1beta/models/m:generateContent"} {
		body := `{"model":"m","max_tokens":5,"input":"from nobody","messages":[{"role":"user","content":"from nobody"}],
			"contents":[{"role":"user","parts":[{"text":"from nobody"}]}]}`
		resp, err := http.Post(base+p, "application/json", strings.NewReader(body))
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusNotFound {
			return resp.StatusCode
		}
		status = resp.StatusCode
	}
	return status
}
