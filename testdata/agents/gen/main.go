// Command gen runs the real agent CLIs (Claude Code, Codex, pi, Gemini CLI)
// against the scripted model server and copies the transcripts they write
// into testdata/claude/, testdata/codex/, testdata/pi/ and testdata/gemini/,
// plus each run's JSON stdout and the model requests into
// testdata/agents/out/<cli>/.
//
// Run it through testdata/agents/generate.sh, from the repository root:
//
//	go run ./testdata/agents/gen -bin /tmp/tine-agents/node_modules/.bin [-only claude,codex,pi,gemini]
//
// It is idempotent: each CLI's previous outputs (listed in
// testdata/agents/out/<cli>/MANIFEST) are deleted before they are regenerated.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	ms "tine/internal/modelserver"
)

// Versions the outputs were made with; the generator refuses others.
var versions = map[string]string{
	"claude": "2.1.328",
	"codex":  "0.169.0",
	"pi":     "0.73.1",
	"gemini": "0.61.0",
}

const apiKeyVar = "TINE_TEST_API_KEY"

type gen struct {
	bin      string // node_modules/.bin
	root     string // scratch root, e.g. /tmp/tine-gen
	project  string // root/project: the agents' cwd
	testdata string // repo/testdata
	timeout  time.Duration
	nodeDir  string
}

// runInfo describes one CLI invocation in out/<cli>/index.json.
type runInfo struct {
	Step       string            `json:"step"`
	Purpose    string            `json:"purpose"`
	Argv       []string          `json:"argv"`
	Env        map[string]string `json:"env"`
	ExitCode   int               `json:"exit_code"`
	SessionID  string            `json:"session_id"`
	Transcript string            `json:"transcript,omitempty"` // relative to testdata/
	Stdout     string            `json:"stdout"`               // relative to testdata/
	Replies    []ms.Reply        `json:"replies"`              // what the server was scripted to answer
	Requests   []int             `json:"requests"`             // seq numbers of this step's model requests
	Extra      map[string]string `json:"extra,omitempty"`
}

type cliIndex struct {
	CLI        string    `json:"cli"`
	Version    string    `json:"version"`
	Package    string    `json:"package"`
	Cwd        string    `json:"cwd"`
	Home       string    `json:"home"`
	GitBranch  string    `json:"git_branch"`
	GitCommit  string    `json:"git_commit"`
	ServerURL  string    `json:"server_url_example"`
	BaseEnv    []string  `json:"base_env"` // the whole environment besides each run's env
	Runs       []runInfo `json:"runs"`
	Transcript []string  `json:"transcripts"` // every copied file, relative to testdata/
}

func main() {
	log.SetFlags(0)
	bin := flag.String("bin", "/tmp/tine-agents/node_modules/.bin", "directory holding the claude, codex and pi binaries")
	root := flag.String("root", "/tmp/tine-gen", "scratch directory (wiped): private homes and the project")
	only := flag.String("only", "claude,codex,pi,gemini", "comma-separated CLIs to regenerate")
	timeout := flag.Duration("timeout", 2*time.Minute, "timeout of one CLI run")
	flag.Parse()

	wd, _ := os.Getwd()
	if b, err := os.ReadFile(filepath.Join(wd, "go.mod")); err != nil || !bytes.HasPrefix(b, []byte("module tine\n")) {
		log.Fatal("gen: run from the repository root (where go.mod says `module tine`)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		log.Fatal("gen: node not found in PATH")
	}
	absBin, _ := filepath.Abs(*bin)
	g := &gen{
		bin:      absBin,
		root:     *root,
		project:  filepath.Join(*root, "project"),
		testdata: filepath.Join(wd, "testdata"),
		timeout:  *timeout,
		nodeDir:  filepath.Dir(node),
	}
	failed := false
	for _, cli := range strings.Split(*only, ",") {
		cli = strings.TrimSpace(cli)
		var f func(*ms.Server, *cliIndex) error
		switch cli {
		case "claude":
			f = g.claude
		case "codex":
			f = g.codex
		case "pi":
			f = g.pi
		case "gemini":
			f = g.gemini
		case "":
			continue
		default:
			log.Fatalf("gen: unknown CLI %q", cli)
		}
		log.Printf("== %s", cli)
		if err := g.generate(cli, f); err != nil {
			log.Printf("gen: %s FAILED: %v", cli, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// generate wipes the CLI's previous outputs, prepares a fresh home and
// project, starts a model server, runs the CLI's steps and writes the index.
func (g *gen) generate(cli string, steps func(*ms.Server, *cliIndex) error) error {
	if err := g.checkVersion(cli); err != nil {
		return err
	}
	outDir := filepath.Join(g.testdata, "agents", "out", cli)
	if err := g.wipe(outDir); err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	home := filepath.Join(g.root, "home-"+cli)
	for _, d := range []string{home, g.project} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	commit, err := g.makeProject()
	if err != nil {
		return fmt.Errorf("project: %w", err)
	}
	srv, err := ms.Start(ms.Options{Logf: func(f string, a ...any) { log.Printf("   "+f, a...) }})
	if err != nil {
		return err
	}
	defer srv.Close()

	idx := &cliIndex{
		CLI: cli, Version: versions[cli], Package: packages[cli], Cwd: g.project, Home: home,
		GitBranch: "main", GitCommit: commit, ServerURL: srv.URL(), BaseEnv: g.baseEnv(home),
	}
	stepErr := steps(srv, idx)

	// Copy transcripts even after a failure: they help diagnose it.
	copied, cerr := g.copyTranscripts(cli, home)
	idx.Transcript = copied
	for i := range idx.Runs {
		idx.Runs[i].Transcript = findTranscript(copied, idx.Runs[i].SessionID)
	}
	if err := writeRequests(filepath.Join(outDir, "requests.jsonl"), srv.Requests()); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(outDir, "index.json"), idx); err != nil {
		return err
	}
	// The manifest lists everything this CLI generated, for the next wipe.
	manifest := slices.Clone(copied)
	_ = filepath.WalkDir(outDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(g.testdata, p)
			manifest = append(manifest, rel)
		}
		return nil
	})
	manifest = append(manifest, filepath.Join("agents", "out", cli, "MANIFEST"))
	sort.Strings(manifest)
	if err := os.WriteFile(filepath.Join(outDir, "MANIFEST"), []byte(strings.Join(manifest, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return errors.Join(stepErr, cerr)
}

var packages = map[string]string{
	"claude": "@anthropic-ai/claude-code",
	"codex":  "@openai/codex",
	"pi":     "@mariozechner/pi-coding-agent",
	"gemini": "@google/gemini-cli",
}

func (g *gen) checkVersion(cli string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(g.bin, cli), "--version")
	cmd.Env = g.baseEnv(filepath.Join(g.root, "home-version"))
	out, err := cmd.CombinedOutput() // pi prints its version on stderr
	if err != nil {
		return fmt.Errorf("%s --version: %v: %s", cli, err, out)
	}
	if !strings.Contains(string(out), versions[cli]) {
		return fmt.Errorf("%s --version says %q, want %s (npm install --prefix ... %s@%s)", cli, strings.TrimSpace(string(out)), versions[cli], packages[cli], versions[cli])
	}
	return nil
}

// wipe deletes the files listed in outDir/MANIFEST, then outDir itself.
func (g *gen) wipe(outDir string) error {
	b, err := os.ReadFile(filepath.Join(outDir, "MANIFEST"))
	if err == nil {
		for _, rel := range strings.Split(string(b), "\n") {
			rel = strings.TrimSpace(rel)
			if rel == "" || strings.Contains(rel, "..") || filepath.IsAbs(rel) {
				continue
			}
			p := filepath.Join(g.testdata, rel)
			_ = os.Remove(p)
			// Remove emptied parent directories up to testdata/<cli>.
			for d := filepath.Dir(p); d != g.testdata && strings.HasPrefix(d, g.testdata); d = filepath.Dir(d) {
				if os.Remove(d) != nil {
					break
				}
			}
		}
	}
	return os.RemoveAll(outDir)
}

// makeProject creates a fixed git repository (same commit hash every time).
func (g *gen) makeProject() (string, error) {
	if err := os.MkdirAll(g.project, 0o755); err != nil {
		return "", err
	}
	files := map[string]string{
		"README.md": "# demo project\n\nA fixed repository that the agents run in.\n",
		"notes.txt": "hello from tine's test project\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(g.project, name), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	env := append(g.baseEnv(filepath.Join(g.root, "home-git")),
		"GIT_AUTHOR_NAME=tine", "GIT_AUTHOR_EMAIL=tine@example.invalid",
		"GIT_COMMITTER_NAME=tine", "GIT_COMMITTER_EMAIL=tine@example.invalid",
		"GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z",
		"GIT_CONFIG_NOSYSTEM=1")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "README.md", "notes.txt"},
		{"commit", "-q", "-m", "initial commit"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = g.project, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("git %v: %v: %s", args, err, out)
		}
	}
	cmd := exec.Command("git", "rev-parse", "HEAD")
	cmd.Dir, cmd.Env = g.project, env
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// baseEnv is the whole environment of a CLI run: nothing is inherited, so a
// developer's real keys and config never leak in.
func (g *gen) baseEnv(home string) []string {
	return []string{
		"HOME=" + home,
		"PATH=" + g.bin + ":" + g.nodeDir + ":/usr/local/bin:/usr/bin:/bin",
		"TZ=UTC",
		"LANG=C.UTF-8",
		"TERM=dumb",
		"NO_COLOR=1",
		"SHELL=/bin/bash",
		"USER=tine",
	}
}

var tools = func() *bool { t := true; return &t }()

// script marks replies as answers to the agent's main loop only (requests that
// offer tools), so side requests (titles etc.) get the default reply instead.
func script(replies ...ms.Reply) []ms.Reply {
	for i := range replies {
		replies[i].Match = &ms.Match{Tools: tools}
	}
	return replies
}

// run executes one CLI step with its scripted replies and saves its stdout.
func (g *gen) run(srv *ms.Server, idx *cliIndex, step, purpose string, env map[string]string, argv []string, replies []ms.Reply) (runInfo, []byte, error) {
	before := len(srv.Requests())
	srv.Push(replies...)
	ri := runInfo{Step: step, Purpose: purpose, Argv: argv, Env: env, Replies: replies}
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(g.bin, argv[0]), argv[1:]...)
	cmd.Dir = g.project
	cmd.Env = g.baseEnv(idx.Home)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	cmd.Stdin = nil // /dev/null
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	log.Printf("-- %s: %s", step, strings.Join(argv, " "))
	err := cmd.Run()
	if cmd.ProcessState != nil {
		ri.ExitCode = cmd.ProcessState.ExitCode()
	}
	for _, r := range srv.Requests()[before:] {
		switch r.API {
		case ms.APIAnthropic, ms.APIChat, ms.APIResponses, ms.APIGemini:
			ri.Requests = append(ri.Requests, r.Seq)
		}
	}
	rel := filepath.Join("agents", "out", idx.CLI, step+".stdout.jsonl")
	ri.Stdout = rel
	if werr := os.WriteFile(filepath.Join(g.testdata, rel), stdout.Bytes(), 0o644); werr != nil {
		return ri, nil, werr
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s", g.timeout)
	}
	if err == nil && srv.Pending() > 0 {
		err = fmt.Errorf("the agent left %d scripted replies unused", srv.Pending())
	}
	if err != nil {
		err = fmt.Errorf("%s: %v\nstderr:\n%s\nstdout (tail):\n%s", step, err, tail(stderr.String(), 3000), tail(stdout.String(), 2000))
	}
	idx.Runs = append(idx.Runs, ri)
	return ri, stdout.Bytes(), err
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// jsonLines decodes each line of a JSONL stream into a generic map.
func jsonLines(b []byte) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// firstString finds the first line where key match[0]==match[1] and returns field.
func firstString(lines []map[string]any, matchKey, matchVal, field string) string {
	for _, m := range lines {
		if v, _ := m[matchKey].(string); v == matchVal {
			if s, ok := m[field].(string); ok {
				return s
			}
		}
	}
	return ""
}

func (g *gen) setRunSession(idx *cliIndex, id string) {
	idx.Runs[len(idx.Runs)-1].SessionID = id
}

// ---------------------------------------------------------------- Claude Code

func (g *gen) claude(srv *ms.Server, idx *cliIndex) error {
	env := map[string]string{
		"ANTHROPIC_BASE_URL":                       srv.URL(),
		"ANTHROPIC_API_KEY":                        "test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_AUTOUPDATER":                      "1",
		"DISABLE_TELEMETRY":                        "1",
		"DISABLE_ERROR_REPORTING":                  "1",
	}
	common := []string{"--output-format", "stream-json", "--verbose", "--allowedTools", "Bash"}
	sessionOf := func(out []byte) string {
		return firstString(jsonLines(out), "type", "system", "session_id")
	}

	// 1. plain turn
	argv := append([]string{"claude", "-p", "say hello"}, common...)
	_, out, err := g.run(srv, idx, "1-hello", "plain turn; starts the main session", env, argv, script(
		ms.Reply{Text: "Hello! I am the scripted test model.", Usage: ms.Usage{InputTokens: 1200, CacheWriteTokens: 3000, OutputTokens: 25}},
	))
	if err != nil {
		return err
	}
	main := sessionOf(out)
	g.setRunSession(idx, main)
	if main == "" {
		return fmt.Errorf("1-hello: no session_id in stdout")
	}

	// 2. Bash tool turn, resuming the same session
	argv = append([]string{"claude", "-p", "run echo hi in the shell", "--resume", main}, common...)
	_, out, err = g.run(srv, idx, "2-bash", "second turn of the main session: a Bash tool call, its result, then text", env, argv, script(
		ms.Reply{
			Thinking:  "The user wants me to run a shell command.",
			Text:      "I'll run it.",
			ToolCalls: []ms.ToolCall{ms.Call("Bash", map[string]any{"command": "echo hi && ls", "description": "Print hi and list files"})},
			Usage:     ms.Usage{InputTokens: 40, CacheReadTokens: 3000, CacheWriteTokens: 200, OutputTokens: 60},
		},
		ms.Reply{Text: "The command printed: hi", Usage: ms.Usage{InputTokens: 30, CacheReadTokens: 3200, CacheWriteTokens: 100, OutputTokens: 20}},
	))
	if err != nil {
		return err
	}
	g.setRunSession(idx, sessionOf(out))

	// 3. fork at the end
	argv = append([]string{"claude", "-p", "fork: now say bye", "--resume", main, "--fork-session"}, common...)
	_, out, err = g.run(srv, idx, "3-fork", "--fork-session at the end of the main session", env, argv, script(
		ms.Reply{Text: "Bye from the fork at the end.", Usage: ms.Usage{InputTokens: 50, CacheReadTokens: 3300, CacheWriteTokens: 40, OutputTokens: 15}},
	))
	if err != nil {
		return err
	}
	g.setRunSession(idx, sessionOf(out))

	// 4. fork at an earlier message: after turn 1's assistant record
	mainFile := filepath.Join(idx.Home, ".claude", "projects", dashed(g.project), main+".jsonl")
	at, err := claudeRecordUUID(mainFile, "Hello! I am the scripted test model.")
	if err != nil {
		return err
	}
	argv = append([]string{"claude", "-p", "fork at turn 1: say something else", "--resume", main, "--fork-session", "--resume-session-at", at}, common...)
	_, out, err = g.run(srv, idx, "4-fork-at", "--fork-session --resume-session-at <uuid of turn 1's assistant record>", env, argv, script(
		ms.Reply{Text: "Something else, from the fork after turn 1.", Usage: ms.Usage{InputTokens: 45, CacheReadTokens: 3000, CacheWriteTokens: 30, OutputTokens: 14}},
	))
	idx.Runs[len(idx.Runs)-1].Extra = map[string]string{"resume_session_at": at}
	if err != nil {
		return err
	}
	g.setRunSession(idx, sessionOf(out))
	return nil
}

var nonAlnum = regexp.MustCompile(`[^A-Za-z0-9]`)

// dashed is Claude Code's project directory name for a cwd.
func dashed(cwd string) string { return nonAlnum.ReplaceAllString(cwd, "-") }

// claudeRecordUUID returns the uuid of the assistant record holding text.
func claudeRecordUUID(path, text string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, m := range jsonLines(b) {
		if m["type"] != "assistant" {
			continue
		}
		msg, _ := m["message"].(map[string]any)
		content, _ := msg["content"].([]any)
		for _, c := range content {
			if cm, _ := c.(map[string]any); cm["type"] == "text" && cm["text"] == text {
				if u, _ := m["uuid"].(string); u != "" {
					return u, nil
				}
			}
		}
	}
	return "", fmt.Errorf("%s: no assistant record with text %q", path, text)
}

// ---------------------------------------------------------------------- Codex

func (g *gen) codex(srv *ms.Server, idx *cliIndex) error {
	codexHome := filepath.Join(idx.Home, ".codex")
	if err := os.MkdirAll(codexHome, 0o755); err != nil {
		return err
	}
	config := fmt.Sprintf(`model = "gpt-5.5"
model_provider = "tine"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[analytics]
enabled = false

[model_providers.tine]
name = "tine test server"
base_url = "%s/v1"
wire_api = "responses"
env_key = "%s"
`, srv.URL(), apiKeyVar)
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o644); err != nil {
		return err
	}
	env := map[string]string{"CODEX_HOME": codexHome, apiKeyVar: "test"}
	common := []string{"--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"}
	threadOf := func(out []byte) string {
		return firstString(jsonLines(out), "type", "thread.started", "thread_id")
	}

	argv := append(append([]string{"codex", "exec"}, common...), "say hello")
	_, out, err := g.run(srv, idx, "1-hello", "plain turn; starts the main thread", env, argv, script(
		ms.Reply{Text: "Hello! I am the scripted test model.", Usage: ms.Usage{InputTokens: 1200, CacheReadTokens: 0, OutputTokens: 25}},
	))
	if err != nil {
		return err
	}
	main := threadOf(out)
	g.setRunSession(idx, main)
	if main == "" {
		return fmt.Errorf("1-hello: no thread.started in stdout")
	}

	argv = append(append([]string{"codex", "exec", "resume"}, common...), main, "run echo hi in the shell")
	_, out, err = g.run(srv, idx, "2-bash", "exec resume: second turn of the main thread, an exec_command call, its output, then text", env, argv, script(
		ms.Reply{
			Thinking:  "The user wants me to run a shell command.",
			Text:      "I'll run it.",
			ToolCalls: []ms.ToolCall{ms.Call("exec_command", map[string]any{"cmd": "echo hi && ls"})},
			Usage:     ms.Usage{InputTokens: 300, CacheReadTokens: 1100, OutputTokens: 60, ReasoningTokens: 12},
		},
		ms.Reply{Text: "The command printed: hi", Usage: ms.Usage{InputTokens: 200, CacheReadTokens: 1400, OutputTokens: 20}},
	))
	if err != nil {
		return err
	}
	g.setRunSession(idx, threadOf(out))

	argv = append(append([]string{"codex", "exec", "fork"}, common...), main, "fork: now say bye")
	_, out, err = g.run(srv, idx, "3-fork", "exec fork at the end of the main thread", env, argv, script(
		ms.Reply{Text: "Bye from the fork at the end.", Usage: ms.Usage{InputTokens: 150, CacheReadTokens: 1600, OutputTokens: 15}},
	))
	if err != nil {
		return err
	}
	g.setRunSession(idx, threadOf(out))
	return nil
}

// ------------------------------------------------------------------------- pi

func (g *gen) pi(srv *ms.Server, idx *cliIndex) error {
	agentDir := filepath.Join(idx.Home, ".pi", "agent")
	if err := os.MkdirAll(agentDir, 0o755); err != nil {
		return err
	}
	models := map[string]any{"providers": map[string]any{"tine": map[string]any{
		"baseUrl": srv.URL() + "/v1",
		"api":     "openai-completions",
		"apiKey":  apiKeyVar,
		"models": []any{map[string]any{
			"id": "tine-test-model", "name": "tine test model", "reasoning": true,
			"contextWindow": 128000, "maxTokens": 4096,
			"cost": map[string]any{"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75},
		}},
	}}}
	if err := writeJSON(filepath.Join(agentDir, "models.json"), models); err != nil {
		return err
	}
	env := map[string]string{"PI_OFFLINE": "1", "PI_TELEMETRY": "0", apiKeyVar: "test"}
	common := []string{"-p", "--mode", "json", "--provider", "tine", "--model", "tine-test-model"}
	sessionOf := func(out []byte) string {
		return firstString(jsonLines(out), "type", "session", "id")
	}

	argv := append(append([]string{"pi"}, common...), "say hello")
	_, out, err := g.run(srv, idx, "1-hello", "plain turn; starts the main session", env, argv, script(
		ms.Reply{Text: "Hello! I am the scripted test model.", Usage: ms.Usage{InputTokens: 1200, OutputTokens: 25}},
	))
	if err != nil {
		return err
	}
	main := sessionOf(out)
	g.setRunSession(idx, main)
	if main == "" {
		return fmt.Errorf("1-hello: no session header in stdout")
	}

	argv = append(append([]string{"pi"}, common...), "--session", main, "run echo hi in the shell")
	_, out, err = g.run(srv, idx, "2-bash", "--session: second turn of the main session, a bash tool call, its result, then text", env, argv, script(
		ms.Reply{
			Thinking:  "The user wants me to run a shell command.",
			Text:      "I'll run it.",
			ToolCalls: []ms.ToolCall{ms.Call("bash", map[string]any{"command": "echo hi && ls"})},
			Usage:     ms.Usage{InputTokens: 300, CacheReadTokens: 1100, OutputTokens: 60, ReasoningTokens: 12},
		},
		ms.Reply{Text: "The command printed: hi", Usage: ms.Usage{InputTokens: 200, CacheReadTokens: 1400, OutputTokens: 20}},
	))
	if err != nil {
		return err
	}
	g.setRunSession(idx, sessionOf(out))

	argv = append(append([]string{"pi"}, common...), "--fork", main, "fork: now say bye")
	_, out, err = g.run(srv, idx, "3-fork", "--fork at the end of the main session", env, argv, script(
		ms.Reply{Text: "Bye from the fork at the end.", Usage: ms.Usage{InputTokens: 150, CacheReadTokens: 1600, OutputTokens: 15}},
	))
	if err != nil {
		return err
	}
	g.setRunSession(idx, sessionOf(out))
	return nil
}

// ----------------------------------------------------------------- Gemini CLI

func (g *gen) gemini(srv *ms.Server, idx *cliIndex) error {
	dir := filepath.Join(idx.Home, ".gemini")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The API key, one attempt a call (a failure shows at once).
	if err := writeJSON(filepath.Join(dir, "settings.json"), map[string]any{
		"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"general":  map[string]any{"maxAttempts": 1},
	}); err != nil {
		return err
	}
	env := map[string]string{"GOOGLE_GEMINI_BASE_URL": srv.URL(), "GEMINI_API_KEY": "test", "GEMINI_CLI_TRUST_WORKSPACE": "true"}
	common := []string{"--output-format", "stream-json", "--model", "gemini-2.5-flash", "--approval-mode", "yolo"}
	sessionOf := func(out []byte) string {
		return firstString(jsonLines(out), "type", "init", "session_id")
	}

	argv := append([]string{"gemini", "-p", "say hello"}, common...)
	_, out, err := g.run(srv, idx, "1-hello", "plain turn; starts the main session", env, argv, script(
		ms.Reply{Text: "Hello! I am the scripted test model.", Usage: ms.Usage{InputTokens: 1200, OutputTokens: 25}},
	))
	if err != nil {
		return err
	}
	main := sessionOf(out)
	g.setRunSession(idx, main)
	if main == "" {
		return fmt.Errorf("1-hello: no init event in stdout")
	}

	argv = append([]string{"gemini", "-p", "run echo hi in the shell", "--resume", main}, common...)
	_, out, err = g.run(srv, idx, "2-bash", "--resume: second turn of the main session, a run_shell_command call, its result, then text", env, argv, script(
		ms.Reply{
			Thinking:  "The user wants me to run a shell command.",
			Text:      "I'll run it.",
			ToolCalls: []ms.ToolCall{ms.Call("run_shell_command", map[string]any{"command": "echo hi && ls"})},
			Usage:     ms.Usage{InputTokens: 300, CacheReadTokens: 1100, OutputTokens: 60, ReasoningTokens: 12},
		},
		ms.Reply{Text: "The command printed: hi", Usage: ms.Usage{InputTokens: 200, CacheReadTokens: 1400, OutputTokens: 20}},
	))
	if err != nil {
		return err
	}
	g.setRunSession(idx, sessionOf(out))

	// 3. a copy of the main session's file, started as a new session
	files, _ := filepath.Glob(filepath.Join(dir, "tmp", "*", "chats", "session-*-"+main[:8]+".jsonl"))
	mainFile := ""
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte("run echo hi in the shell")) {
			mainFile = f
		}
	}
	if mainFile == "" {
		return fmt.Errorf("3-fork: no session file of %s in %v", main, files)
	}
	argv = append([]string{"gemini", "-p", "fork: now say bye", "--session-file", mainFile}, common...)
	_, out, err = g.run(srv, idx, "3-fork", "--session-file <the main session's file>: a new session holding a copy of it", env, argv, script(
		ms.Reply{Text: "Bye from the fork at the end.", Usage: ms.Usage{InputTokens: 150, CacheReadTokens: 1600, OutputTokens: 15}},
	))
	idx.Runs[len(idx.Runs)-1].Extra = map[string]string{"session_file": mainFile}
	if err != nil {
		return err
	}
	g.setRunSession(idx, sessionOf(out))
	return nil
}

// ------------------------------------------------------------------- outputs

// copyTranscripts copies the CLI's transcript tree from its home into
// testdata/<cli>/, keeping the layout relative to the CLI's data directory.
func (g *gen) copyTranscripts(cli, home string) ([]string, error) {
	var src string
	var parts []string // subpaths of src to copy
	switch cli {
	case "claude":
		src, parts = filepath.Join(home, ".claude"), []string{"projects"}
	case "codex":
		src, parts = filepath.Join(home, ".codex"), []string{"sessions", "session_index.jsonl"}
	case "pi":
		src, parts = filepath.Join(home, ".pi", "agent"), []string{"sessions"}
	case "gemini":
		src, parts = filepath.Join(home, ".gemini"), []string{"tmp"}
	}
	var copied []string
	for _, part := range parts {
		err := filepath.WalkDir(filepath.Join(src, part), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(src, p)
			dst := filepath.Join(g.testdata, cli, rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				return err
			}
			copied = append(copied, filepath.Join(cli, rel))
			return nil
		})
		if err != nil {
			return copied, err
		}
	}
	sort.Strings(copied)
	return copied, nil
}

func findTranscript(files []string, id string) string {
	if id == "" {
		return ""
	}
	for _, f := range files {
		base := filepath.Base(f)
		if strings.HasSuffix(f, ".jsonl") && strings.Contains(base, id) {
			return f
		}
	}
	return ""
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeRequests saves every request the server saw, one JSON object a line,
// without credentials.
func writeRequests(path string, reqs []ms.Request) error {
	var buf bytes.Buffer
	for _, r := range reqs {
		r.Header = r.Header.Clone()
		for _, h := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"} {
			if r.Header.Get(h) != "" {
				r.Header.Set(h, "REDACTED")
			}
		}
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
