// Command gen runs the real Claude Code CLI against the scripted model server
// for the transcript shapes testdata/agents/gen does not cover: parallel tool
// calls, an in-file branch (--resume-session-at without --fork-session), a
// subagent (the Agent tool), an image tool result and a compaction. It writes
// the transcripts under testdata/claude/extra/projects/ and each step's stdout
// plus an index under testdata/claude/extra/out/.
//
// From the repository root:
//
//	go run ./testdata/claude/gen -bin /tmp/tine-agents/node_modules/.bin
//
// It wipes testdata/claude/extra/ first, so it is idempotent.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
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
	"sort"
	"strings"
	"time"

	ms "tine/internal/modelserver"
)

const version = "2.1.328"

type step struct {
	Name      string            `json:"step"`
	Argv      []string          `json:"argv"`
	SessionID string            `json:"session_id"`
	Stdout    string            `json:"stdout"`
	Replies   []ms.Reply        `json:"replies"`
	Extra     map[string]string `json:"extra,omitempty"`
}

type index struct {
	Version     string   `json:"version"`
	Cwd         string   `json:"cwd"`
	Steps       []step   `json:"steps"`
	Transcripts []string `json:"transcripts"` // relative to testdata/claude/extra
}

type gen struct {
	bin, home, project, out string
	nodeDir                 string
	srv                     *ms.Server
	idx                     index
}

func main() {
	log.SetFlags(0)
	bin := flag.String("bin", "/tmp/tine-agents/node_modules/.bin", "directory holding the claude binary")
	root := flag.String("root", "/tmp/tine-gen", "scratch directory")
	flag.Parse()
	wd, _ := os.Getwd()
	if b, err := os.ReadFile(filepath.Join(wd, "go.mod")); err != nil || !bytes.HasPrefix(b, []byte("module tine\n")) {
		log.Fatal("gen: run from the repository root")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		log.Fatal("gen: node not found in PATH")
	}
	absBin, _ := filepath.Abs(*bin)
	g := &gen{
		bin:     absBin,
		home:    filepath.Join(*root, "home-claude-extra"),
		project: filepath.Join(*root, "extra"),
		out:     filepath.Join(wd, "testdata", "claude", "extra"),
		nodeDir: filepath.Dir(node),
	}
	if err := g.main(); err != nil {
		log.Fatalf("gen: %v", err)
	}
}

func (g *gen) main() error {
	for _, d := range []string{g.home, g.project, g.out} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	for _, d := range []string{g.home, g.project, filepath.Join(g.out, "out")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := g.makeProject(); err != nil {
		return err
	}
	srv, err := ms.Start(ms.Options{Logf: func(f string, a ...any) { log.Printf("   "+f, a...) }})
	if err != nil {
		return err
	}
	defer srv.Close()
	g.srv = srv
	g.idx = index{Version: version, Cwd: g.project}
	stepErr := g.steps()
	copied, cerr := g.copyTranscripts()
	g.idx.Transcripts = copied
	if err := g.writeRequests(); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(g.idx, "", "  ")
	if err := os.WriteFile(filepath.Join(g.out, "out", "index.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return errors.Join(stepErr, cerr)
}

func (g *gen) makeProject() error {
	// A 2x2 red PNG for the image step.
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEklEQVR4nGP4z8DAwMDAxMDAAAAcCQMBvOXzOwAAAABJRU5ErkJggg==")
	files := map[string][]byte{
		"README.md": []byte("# extra project\n"),
		"dot.png":   png,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(g.project, name), content, 0o644); err != nil {
			return err
		}
	}
	env := append(g.baseEnv(filepath.Join(filepath.Dir(g.home), "home-git")),
		"GIT_AUTHOR_NAME=tine", "GIT_AUTHOR_EMAIL=tine@example.invalid",
		"GIT_COMMITTER_NAME=tine", "GIT_COMMITTER_EMAIL=tine@example.invalid",
		"GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z",
		"GIT_CONFIG_NOSYSTEM=1")
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"commit", "-q", "-m", "initial"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = g.project, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v: %s", args, err, out)
		}
	}
	return nil
}

func (g *gen) baseEnv(home string) []string {
	return []string{
		"HOME=" + home,
		"PATH=" + g.bin + ":" + g.nodeDir + ":/usr/local/bin:/usr/bin:/bin",
		"TZ=UTC", "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1", "SHELL=/bin/bash", "USER=tine",
	}
}

var yes = func() *bool { t := true; return &t }()

// tools marks replies as answers to requests that offer tools, so side
// requests get the default reply.
func tools(replies ...ms.Reply) []ms.Reply {
	for i := range replies {
		if replies[i].Match == nil {
			replies[i].Match = &ms.Match{Tools: yes}
		}
	}
	return replies
}

// run runs one claude invocation and returns its session id.
func (g *gen) run(name string, args []string, replies []ms.Reply) (string, error) {
	g.srv.Push(replies...)
	argv := append([]string{"claude", "-p"}, args...)
	argv = append(argv, "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash,Read,Agent")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(g.bin, "claude"), argv[1:]...)
	cmd.Dir = g.project
	cmd.Env = append(g.baseEnv(g.home),
		"ANTHROPIC_BASE_URL="+g.srv.URL(),
		"ANTHROPIC_API_KEY=test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	log.Printf("-- %s: %s", name, strings.Join(argv, " "))
	err := cmd.Run()
	rel := filepath.Join("out", name+".stdout.jsonl")
	if werr := os.WriteFile(filepath.Join(g.out, rel), stdout.Bytes(), 0o644); werr != nil {
		return "", werr
	}
	st := step{Name: name, Argv: argv, Stdout: rel, Replies: replies, SessionID: sessionOf(stdout.Bytes())}
	g.idx.Steps = append(g.idx.Steps, st)
	if err == nil && g.srv.Pending() > 0 {
		err = fmt.Errorf("%d scripted replies unused", g.srv.Pending())
		g.srv.Reset()
	}
	if err != nil {
		return "", fmt.Errorf("%s: %v\nstderr: %s\nstdout: %s", name, err, tail(stderr.String()), tail(stdout.String()))
	}
	return st.SessionID, nil
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}

func sessionOf(out []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m struct {
			Type      string `json:"type"`
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal(sc.Bytes(), &m) == nil && m.Type == "system" && m.SessionID != "" {
			return m.SessionID
		}
	}
	return ""
}

func (g *gen) steps() error {
	// 1. parallel tool calls in one assistant message.
	par, err := g.run("1-parallel", []string{"run two commands at once"}, tools(
		ms.Reply{
			Text: "Running both.",
			ToolCalls: []ms.ToolCall{
				ms.Call("Bash", map[string]any{"command": "echo one", "description": "Print one"}),
				ms.Call("Bash", map[string]any{"command": "echo two", "description": "Print two"}),
			},
			Usage: ms.Usage{InputTokens: 100, CacheWriteTokens: 3000, OutputTokens: 40},
		},
		ms.Reply{Text: "Both done.", Usage: ms.Usage{InputTokens: 20, CacheReadTokens: 3000, CacheWriteTokens: 80, OutputTokens: 5}},
	))
	if err != nil {
		return err
	}
	// 2. a second turn, then 3. a rewind to the end of turn 1 in the same
	// file: --resume-session-at without --fork-session.
	if _, err := g.run("2-turn2", []string{"say something", "--resume", par}, tools(
		ms.Reply{Text: "Something.", Usage: ms.Usage{InputTokens: 10, CacheReadTokens: 3080, CacheWriteTokens: 20, OutputTokens: 3}},
	)); err != nil {
		return err
	}
	at, err := recordUUID(filepath.Join(g.home, ".claude", "projects", dashed(g.project), par+".jsonl"), "Both done.")
	if err != nil {
		return err
	}
	if _, err := g.run("3-rewind", []string{"branch: say another thing", "--resume", par, "--resume-session-at", at}, tools(
		ms.Reply{Text: "Another thing.", Usage: ms.Usage{InputTokens: 11, CacheReadTokens: 3080, CacheWriteTokens: 21, OutputTokens: 4}},
	)); err != nil {
		return err
	}
	g.idx.Steps[len(g.idx.Steps)-1].Extra = map[string]string{"resume_session_at": at}

	// 4. a subagent: the Agent tool, run in the foreground.
	if _, err := g.run("4-subagent", []string{"delegate a task"}, tools(
		ms.Reply{
			Text: "Delegating.",
			ToolCalls: []ms.ToolCall{ms.Call("Agent", map[string]any{
				"description": "List files", "prompt": "List the files in the project. SUBTASK-7",
				"subagent_type": "general-purpose", "run_in_background": false,
			})},
			Usage: ms.Usage{InputTokens: 200, CacheWriteTokens: 3000, OutputTokens: 30},
		},
		ms.Reply{
			ToolCalls: []ms.ToolCall{ms.Call("Bash", map[string]any{"command": "ls", "description": "List files"})},
			Usage:     ms.Usage{InputTokens: 300, CacheWriteTokens: 2000, OutputTokens: 12},
		},
		ms.Reply{Text: "The project holds README.md and dot.png.", Usage: ms.Usage{InputTokens: 30, CacheReadTokens: 2000, OutputTokens: 11}},
		ms.Reply{Text: "The subagent found two files.", Usage: ms.Usage{InputTokens: 40, CacheReadTokens: 3000, CacheWriteTokens: 60, OutputTokens: 7}},
	)); err != nil {
		return err
	}

	// 5. an image tool result: Read a PNG.
	if _, err := g.run("5-image", []string{"look at the picture"}, tools(
		ms.Reply{
			ToolCalls: []ms.ToolCall{ms.Call("Read", map[string]any{"file_path": filepath.Join(g.project, "dot.png")})},
			Usage:     ms.Usage{InputTokens: 50, CacheWriteTokens: 3000, OutputTokens: 9},
		},
		ms.Reply{Text: "It is a small red square.", Usage: ms.Usage{InputTokens: 90, CacheReadTokens: 3000, OutputTokens: 8}},
	)); err != nil {
		return err
	}

	// 6. compaction: a turn, /compact, then a turn after it.
	cmp, err := g.run("6-compact-hello", []string{"say hello before compacting"}, tools(
		ms.Reply{Text: "Hello before compacting.", Usage: ms.Usage{InputTokens: 60, CacheWriteTokens: 3000, OutputTokens: 6}},
	))
	if err != nil {
		return err
	}
	if _, err := g.run("7-compact", []string{"/compact", "--resume", cmp}, []ms.Reply{
		{Text: "<summary>The user asked for a hello and got one.</summary>", Usage: ms.Usage{InputTokens: 3100, OutputTokens: 20}},
	}); err != nil {
		return err
	}
	if _, err := g.run("8-after-compact", []string{"say hello after compacting", "--resume", cmp}, tools(
		ms.Reply{Text: "Hello after compacting.", Usage: ms.Usage{InputTokens: 70, CacheWriteTokens: 2900, OutputTokens: 6}},
	)); err != nil {
		return err
	}

	// 9. a "fork" subagent: it inherits the conversation by reference.
	if _, err := g.run("9-fork-subagent", []string{"fork yourself to check something"}, tools(
		ms.Reply{
			ToolCalls: []ms.ToolCall{ms.Call("Agent", map[string]any{
				"description": "Check something", "prompt": "Check something. FORKTASK-9",
				"subagent_type": "fork", "run_in_background": false,
			})},
			Usage: ms.Usage{InputTokens: 80, CacheWriteTokens: 3000, OutputTokens: 15},
		},
		ms.Reply{Text: "Checked: all good.", Usage: ms.Usage{InputTokens: 25, CacheReadTokens: 3000, OutputTokens: 5}},
		ms.Reply{Text: "The fork says all is good.", Usage: ms.Usage{InputTokens: 35, CacheReadTokens: 3000, CacheWriteTokens: 50, OutputTokens: 8}},
	)); err != nil {
		return err
	}
	return nil
}

// writeRequests saves every request the server saw, without credentials.
func (g *gen) writeRequests() error {
	var buf bytes.Buffer
	for _, r := range g.srv.Requests() {
		r.Header = r.Header.Clone()
		for _, h := range []string{"Authorization", "X-Api-Key"} {
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
	return os.WriteFile(filepath.Join(g.out, "out", "requests.jsonl"), buf.Bytes(), 0o644)
}

var nonAlnum = regexp.MustCompile(`[^A-Za-z0-9]`)

func dashed(cwd string) string { return nonAlnum.ReplaceAllString(cwd, "-") }

// recordUUID returns the uuid of the assistant record holding text.
func recordUUID(path, text string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var r struct {
			Type    string `json:"type"`
			UUID    string `json:"uuid"`
			Message struct {
				Content []struct {
					Type, Text string
				} `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(line, &r) != nil || r.Type != "assistant" {
			continue
		}
		for _, c := range r.Message.Content {
			if c.Type == "text" && c.Text == text {
				return r.UUID, nil
			}
		}
	}
	return "", fmt.Errorf("%s: no assistant record with %q", path, text)
}

// copyTranscripts copies ~/.claude/projects into testdata/claude/extra/projects.
func (g *gen) copyTranscripts() ([]string, error) {
	src := filepath.Join(g.home, ".claude")
	var copied []string
	err := filepath.WalkDir(filepath.Join(src, "projects"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(g.out, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		copied = append(copied, rel)
		return os.WriteFile(dst, b, 0o644)
	})
	sort.Strings(copied)
	return copied, err
}
