package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/anthropic"
	"tine/harness/fork"
	"tine/harness/openai"
	"tine/harness/registry"
	"tine/harness/script"
	"tine/model"
)

// fakeAgent is an agent as the Fork screen sees one: it keeps sessions of
// its own and says whether it is installed.
type fakeAgent struct {
	name string
	caps harness.Capabilities
	desc harness.Description
}

func (f *fakeAgent) Name() string                       { return f.name }
func (f *fakeAgent) Capabilities() harness.Capabilities { return f.caps }
func (f *fakeAgent) Describe(context.Context) harness.Description {
	return f.desc
}
func (f *fakeAgent) Turn(context.Context, harness.TurnRequest, func(harness.Event)) error {
	return errors.New("a fake agent runs no turns")
}

// agentRegistry holds agents the way the real claude, codex and acp
// packages declare them, and the script harness.
// capsOf is what backend name can do, as its descriptor says.
func capsOf(name string) harness.Capabilities {
	a, _ := registry.New(harness.Setup{}).Agent(name)
	return a.Caps
}

func agentRegistry() *harness.Registry {
	return harness.NewRegistry(
		&fakeAgent{name: "claude", caps: capsOf("claude"), desc: harness.Description{Installed: true, Version: "2.0.14"}},
		&fakeAgent{name: "codex", caps: capsOf("codex"), desc: harness.Description{Needs: []string{"npm i -g @openai/codex"}}},
		&fakeAgent{name: "acp", caps: capsOf("acp"), desc: harness.Description{Installed: true}},
		&script.Harness{})
}

// gitRepo is a git repository with one commit holding parser.go.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	git("init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "parser.go"), []byte("package parser\n\nfunc Parse() {}\n"), 0o644))
	git("add", ".")
	git("commit", "-qm", "init")
	return dir
}

var dialogKeys = DefaultKeyMap().Dialog

// focusField moves the dialog's focus down to field f.
func focusField(t *testing.T, d *forkDialog, f int) {
	t.Helper()
	for i := 0; d.cur != f; i++ {
		require.Less(t, i, 60, "field %d is not shown", f)
		d.update(press("down"), dialogKeys)
	}
}

func typeInto(d *forkDialog, s string) {
	for _, r := range s {
		d.update(press(string(r)), dialogKeys)
	}
}

func dialogText(d *forkDialog) string {
	st := NewStyles(true)
	d.setSize(160, 200)
	return ansi.Strip(d.view(&st))
}

// TestForkDialogDefaults: the run's own agent is chosen; another agent
// needs a handoff, which is off until turned on; a directory that is not a
// git repository is said so, with in place offered.
func TestForkDialogDefaults(t *testing.T) {
	data := sampleTree()
	parent := data.runs[0].run()
	parent.Harness, parent.NativeID, parent.Cwd = "claude", "sess-1", t.TempDir()
	reg := agentRegistry()
	runs := map[string]model.Run{parent.ID: parent}
	d := newForkDialog(parent, data.transcript(0), 5, reg, "claude", runs)

	assert.Equal(t, "claude", d.harnessName(), "the run's own agent")
	assert.Empty(t, d.fit().handoff, "claude branches its own session")
	assert.NotContains(t, d.fields(), fieldHandoff, "no handoff switch when none is needed")
	assert.Contains(t, d.fields(), fieldWorkdir, "an agent's forks get a worktree choice")
	assert.Contains(t, dialogText(d), "checking…", "installed or not is asked off the UI goroutine")

	d.info(describeHarnesses(context.Background(), d.gen, &descCache{}, reg, parent.Cwd)().(harnessInfoMsg))
	text := dialogText(d)
	assert.Contains(t, text, "claude  installed (2.0.14)")
	assert.Contains(t, text, "codex   cannot branch this claude session: handoff · not installed · forks at any checkpoint")
	assert.Contains(t, text, "is not a git repository, so forks cannot get worktrees of their own: run them in place")
	assert.Contains(t, text, "‹ own git worktree ›", "worktree stays the default")
	assert.Contains(t, d.problem(), "choose “in place” under work in")
	focusField(t, d, fieldWorkdir)
	d.update(press("right"), dialogKeys)
	assert.Contains(t, dialogText(d), "‹ in place ›")
	assert.Empty(t, d.problem())
	spec := d.spec()
	assert.True(t, spec.InPlace)
	assert.False(t, spec.Handoff)
	assert.Equal(t, "claude", spec.Harness)

	// Another agent cannot branch claude's session: a handoff, off.
	focusField(t, d, fieldHarness)
	for d.harnessName() != "codex" { // after the run's own, claude
		d.update(press("right"), dialogKeys)
	}
	assert.Contains(t, d.fields(), fieldHandoff)
	text = dialogText(d)
	assert.Contains(t, text, "codex needs npm i -g @openai/codex", "what stops the chosen harness, in full")
	assert.Contains(t, text, "handoff       ‹ off ›  handoff: new session with the transcript")
	assert.Contains(t, d.problem(), "codex cannot branch this claude session: turn on handoff")
	assert.Contains(t, d.problem(), "or pick claude")
	assert.False(t, d.spec().Handoff, "never a handoff unless asked for")
	focusField(t, d, fieldHandoff)
	d.update(press("space"), dialogKeys)
	assert.Empty(t, d.problem(), "creating forks needs nothing installed")
	focusField(t, d, fieldMessage)
	typeInto(d, "try it")
	assert.Equal(t, "codex needs npm i -g @openai/codex (with no message the forks are only created)", d.problem(),
		"running a turn needs the agent installed")
	for range "try it" {
		d.update(press("backspace"), dialogKeys)
	}
	assert.Empty(t, d.problem())
	spec = d.spec()
	assert.True(t, spec.Handoff)
	assert.True(t, spec.InPlace, "the choices made before stay")
	focusField(t, d, fieldHarness)
	d.update(press("right"), dialogKeys) // script: not an agent
	assert.False(t, d.spec().Handoff, "a handoff only goes with a harness that needs one")
	assert.False(t, d.spec().InPlace)
	assert.NotContains(t, d.fields(), fieldWorkdir)

	// A git repository: worktrees, and nothing to say against them.
	parent.Cwd = gitRepo(t)
	d = newForkDialog(parent, data.transcript(0), 5, reg, "claude", map[string]model.Run{parent.ID: parent})
	d.info(describeHarnesses(context.Background(), d.gen, &descCache{}, reg, parent.Cwd)().(harnessInfoMsg))
	assert.Empty(t, d.problem())
	assert.Contains(t, dialogText(d), "each fork gets a git worktree and branch of its own")
	assert.False(t, d.spec().InPlace)
}

// TestForkDialogSaysTheUncommittedWorkGoesAlong: a fork's worktree starts
// with its checkout's uncommitted files as they are now, so the dialog
// says how many, and, for a fork before the end, that they are not the
// files as they were at that message; a clean checkout says nothing.
func TestForkDialogSaysTheUncommittedWorkGoesAlong(t *testing.T) {
	data := sampleTree()
	parent := data.runs[0].run()
	reg := agentRegistry()
	parent.Cwd = gitRepo(t)
	open := func() *forkDialog {
		d := newForkDialog(parent, data.transcript(0), 2, reg, "claude", map[string]model.Run{parent.ID: parent})
		d.info(describeHarnesses(context.Background(), d.gen, &descCache{}, reg, parent.Cwd)().(harnessInfoMsg))
		return d
	}
	assert.NotContains(t, dialogText(open()), "uncommitted", "a clean checkout")

	require.NoError(t, os.WriteFile(filepath.Join(parent.Cwd, "parser.go"), []byte("package parser\n\nfunc Parse() { later() }\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(parent.Cwd, "notes.txt"), []byte("untracked\n"), 0o644))
	d := open()
	cut, err := d.currentCut()
	require.NoError(t, err)
	require.Less(t, cut.K, d.bounds.Len(), "a fork before the end")
	text := strings.Join(strings.Fields(dialogText(d)), " ")
	assert.Contains(t, text, fmt.Sprintf("its HEAD and its 2 uncommitted files as they are now, not as they were at message %d", cut.K))
	d.update(press("right"), dialogKeys) // continue from the end
	require.Equal(t, model.ContinueFrom("end"), d.at())
	text = strings.Join(strings.Fields(dialogText(d)), " ")
	assert.Contains(t, text, "its HEAD and its 2 uncommitted files as they are now")
	assert.NotContains(t, text, "not as they were", "at the end they are the files the session left")
}

// TestForkDialogEndOnlyAgent: an agent that forks only at a session's end
// says so; only the end needs no handoff.
func TestForkDialogEndOnlyAgent(t *testing.T) {
	data := sampleTree()
	parent := data.runs[0].run()
	parent.Harness, parent.NativeID = "acp", "sess-acp"
	reg := agentRegistry()
	d := newForkDialog(parent, data.transcript(0), 2, reg, "acp", map[string]model.Run{parent.ID: parent})
	d.info(describeHarnesses(context.Background(), d.gen, &descCache{}, reg, "")().(harnessInfoMsg))
	assert.Equal(t, "acp forks only at a session's end", d.fit().handoff)
	text := dialogText(d)
	assert.Contains(t, text, "acp forks only at a session's end: anywhere else is a handoff")
	assert.Contains(t, text, "acp     forks only at a session's end: handoff · installed · forks at the end only")
	d.update(press("right"), dialogKeys) // continue from the end
	assert.Equal(t, model.ContinueFrom("end"), d.at())
	assert.Empty(t, d.fit().handoff)
	assert.NotContains(t, d.fields(), fieldHandoff)
}

// TestForkDialogAPIFields: an API harness gets model, base URL and key
// fields, checked before launch; the key never shows; what is typed stays.
func TestForkDialogAPIFields(t *testing.T) {
	for _, v := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL"} {
		t.Setenv(v, "")
	}
	data := sampleTree()
	parent := data.runs[0].run() // made by openai, no model recorded
	base := &fork.Driver{Harnesses: harness.NewRegistry(&script.Harness{}, openai.New(openai.Config{}), anthropic.New(anthropic.Config{}))}
	d := newForkDialog(parent, data.transcript(0), 5, base.Harnesses, "openai", nil)
	assert.Subset(t, d.fields(), []int{fieldModel, fieldBaseURL, fieldAPIKey})
	assert.Contains(t, d.problem(), "openai needs an API key for api.openai.com: set OPENAI_API_KEY or type one under API key")

	focusField(t, d, fieldBaseURL)
	typeInto(d, "ftp://example.com")
	assert.Contains(t, d.problem(), `base URL must be an http:// or https:// URL with a host, not "ftp://example.com"`)
	res, _ := d.update(press("ctrl+s"), dialogKeys)
	assert.Equal(t, dialogStay, res, "a bad field keeps the dialog open")
	assert.Contains(t, dialogText(d), "must be an http:// or https:// URL")
	for range "ftp://example.com" {
		d.update(press("backspace"), dialogKeys)
	}
	typeInto(d, "http://127.0.0.1:8080/v1")
	assert.Equal(t, "openai needs a model: type one under model (or set OPENAI_MODEL)", d.problem(), "a local server needs no key")
	focusField(t, d, fieldAPIKey)
	typeInto(d, "sk-very-secret")
	text := dialogText(d)
	assert.NotContains(t, text, "sk-very-secret", "the key is masked")
	assert.Contains(t, text, "••••••••••••••")
	for d.cur != fieldModel {
		d.update(press("up"), dialogKeys)
	}
	typeInto(d, "llama3")
	assert.Empty(t, d.problem())

	// Across fields and harnesses, what was typed stays.
	focusField(t, d, fieldCheck)
	for d.cur != fieldHarness {
		d.update(press("up"), dialogKeys)
	}
	d.update(press("right"), dialogKeys) // from the run's own, openai, first
	assert.Equal(t, "anthropic", d.harnessName())
	assert.Contains(t, d.problem(), "anthropic needs an API key for api.anthropic.com: set ANTHROPIC_API_KEY")
	d.update(press("left"), dialogKeys)
	assert.Equal(t, apiSettings{model: "llama3", baseURL: "http://127.0.0.1:8080/v1", key: "sk-very-secret"}, d.settings("openai"))
	spec := d.spec()
	assert.Equal(t, "llama3", spec.Model)
	drv := d.driver(base)
	require.NotSame(t, base, drv, "a launch with its own base URL and key runs on a copy")
	mine, _ := drv.Harnesses.Get("openai")
	shared, _ := base.Harnesses.Get("openai")
	assert.NotSame(t, shared, mine)
	other, _ := drv.Harnesses.Get("script")
	assert.NotNil(t, other, "with the other harnesses")

	t.Setenv("ANTHROPIC_API_KEY", "from-env")
	t.Setenv("ANTHROPIC_MODEL", "claude-x")
	d = newForkDialog(parent, data.transcript(0), 5, base.Harnesses, "anthropic", nil)
	assert.Empty(t, d.problem(), "the environment's key and model do")
	assert.Same(t, base, d.driver(base), "nothing typed: the shared driver")
	assert.Contains(t, dialogText(d), "from ANTHROPIC_API_KEY")
	assert.NotContains(t, dialogText(d), "from-env")
}

// TestForkDialogCheck: the check command and how it scores reach the
// fork request.
func TestForkDialogCheck(t *testing.T) {
	data := sampleTree()
	d := newForkDialog(data.runs[0].run(), data.transcript(0), 5, harness.NewRegistry(&script.Harness{}), "script", nil)
	assert.Empty(t, d.spec().Check)
	focusField(t, d, fieldCheck)
	typeInto(d, "go test ./...")
	spec := d.spec()
	assert.Equal(t, "go test ./...", spec.Check)
	assert.False(t, spec.CheckNumber, "scored by exit status unless asked")
	d.update(press("down"), dialogKeys)
	d.update(press("space"), dialogKeys)
	assert.True(t, d.spec().CheckNumber)
	assert.Contains(t, dialogText(d), "‹ the number on its last line: highest wins ›")
}

func TestDriverErrorsSpeakOfTheDialog(t *testing.T) {
	err := errors.New("run x worked in /a, which is not a git repository, so its forks cannot get worktrees of their own: pass --in-place to run them there, sharing it")
	assert.Equal(t, "run x worked in /a, which is not a git repository, so its forks cannot get worktrees of their own: choose “in place” under work in to run them there, sharing it", tuiError(err))
	err = errors.New("no codex session holds this run's first 4 messages (it was made by claude); a handoff starts a new codex session whose first message is the transcript so far: pass --handoff to do that")
	assert.True(t, strings.HasSuffix(tuiError(err), "turn on handoff to do that"))
}

// countingDescriber counts how often it is asked to describe itself; it
// is installed, or says desc when set.
type countingDescriber struct {
	harness.Harness
	n    atomic.Int32
	desc harness.Description
}

func (c *countingDescriber) Describe(context.Context) harness.Description {
	c.n.Add(1)
	if c.desc.Installed || c.desc.Problem != "" {
		return c.desc
	}
	return harness.Description{Installed: true}
}

// Asking a harness whether it is installed starts its CLI: dialogs opened
// one after another ask once, not every time.
func TestHarnessDescriptionsAreKept(t *testing.T) {
	t.Parallel()
	c := &countingDescriber{Harness: &script.Harness{}}
	reg := harness.NewRegistry(c)
	cache := &descCache{}
	for range 3 {
		msg := describeHarnesses(context.Background(), 0, cache, reg, "")().(harnessInfoMsg)
		assert.True(t, msg.descs["script"].Installed)
	}
	assert.Equal(t, int32(1), c.n.Load())
}

// TestForkDialogRunsAnAgentWhoseVersionTookTooLong: an installed agent
// whose --version did not answer in time (a busy machine) is shown
// installed and its turns are not refused ("pi --version failed" refused
// them for a minute); what it did not say is asked again when a dialog
// next opens.
func TestForkDialogRunsAnAgentWhoseVersionTookTooLong(t *testing.T) {
	t.Parallel()
	late := fmt.Errorf("claude --version failed: no answer within 10s: %w", context.DeadlineExceeded)
	c := &countingDescriber{Harness: &fakeAgent{name: "claude", caps: capsOf("claude")},
		desc: harness.Description{}.Probed("/usr/local/bin/claude", "", late)}
	reg := harness.NewRegistry(c, &script.Harness{})
	data := sampleTree()
	parent := data.runs[0].run()
	parent.Harness, parent.NativeID, parent.Cwd = "claude", "sess-1", gitRepo(t)
	cache := &descCache{}
	var d *forkDialog
	for range 2 {
		d = newForkDialog(parent, data.transcript(0), 5, reg, "claude", map[string]model.Run{parent.ID: parent})
		d.info(describeHarnesses(context.Background(), d.gen, cache, reg, parent.Cwd)().(harnessInfoMsg))
	}
	assert.Equal(t, int32(2), c.n.Load(), "asked again: it has more to say")
	focusField(t, d, fieldMessage)
	typeInto(d, "try it")
	assert.Empty(t, d.problem(), "a turn is not refused for a slow --version")
	assert.Contains(t, dialogText(d), "claude  installed (version not known yet)")
}

// TestForkDialogBudget: the Fork screen's max tokens and max cost are each
// fork's budget; what is no budget, or one tine cannot keep, is said in
// the dialog's words and stops the launch.
func TestForkDialogBudget(t *testing.T) {
	data := sampleTree()
	d := newForkDialog(data.runs[0].run(), data.transcript(0), 5, harness.NewRegistry(&script.Harness{}), "script", nil)
	assert.True(t, d.spec().Budget.IsZero(), "none unless typed")
	focusField(t, d, fieldMaxTokens)
	typeInto(d, "lots")
	assert.Equal(t, `max tokens is a number of tokens above 0, such as 20000, not "lots"`, d.problem())
	res, _ := d.update(press("ctrl+s"), dialogKeys)
	assert.Equal(t, dialogStay, res, "not launched")
	for range "lots" {
		d.update(press("backspace"), dialogKeys)
	}
	typeInto(d, "20,000")
	assert.Empty(t, d.problem())
	assert.Equal(t, model.Budget{Tokens: 20_000}, d.spec().Budget)
	assert.Contains(t, dialogText(d), "a fork that spends more than 20,000 tokens is stopped and recorded failed; what it streamed is kept")

	d.update(press("down"), dialogKeys)
	require.Equal(t, fieldMaxCost, d.cur)
	typeInto(d, "-1")
	assert.Equal(t, `max cost is an amount of US dollars above 0, such as 0.50, not "-1"`, d.problem())
	d.update(press("backspace"), dialogKeys)
	d.update(press("backspace"), dialogKeys)
	typeInto(d, "0.50")
	// The model the forks ask for is the run's, when it is the harness's
	// own; script-1 has no price.
	d.parent.Harness, d.parent.Model = "script", "script-1"
	assert.Contains(t, d.problem(), `max cost $0.50: tine does not know the price of model "script-1", so it cannot keep a cost budget; bound its tokens with max tokens instead`)
	d.parent.Model = "claude-haiku-4-5"
	assert.Empty(t, d.problem())
	assert.Equal(t, model.Budget{Tokens: 20_000, USD: 0.5}, d.spec().Budget)
}

// TestForkDialogOffersContainers: with a place elsewhere (docker), "work
// in" goes worktree, container, in place; a container fork asks for that
// place and is not in place. Without one, the choice is not offered.
func TestForkDialogOffersContainers(t *testing.T) {
	data := sampleTree()
	parent := data.runs[0].run()
	parent.Harness, parent.NativeID, parent.Cwd = "claude", "sess-1", gitRepo(t)
	reg := agentRegistry()
	runs := map[string]model.Run{parent.ID: parent}
	d := newForkDialog(parent, data.transcript(0), 5, reg, "claude", runs)
	d.elsewhere = "docker:far"
	d.info(describeHarnesses(context.Background(), d.gen, &descCache{}, reg, parent.Cwd)().(harnessInfoMsg))
	assert.Empty(t, d.spec().On, "this machine stays the default")
	focusField(t, d, fieldWorkdir)
	d.update(press("right"), dialogKeys)
	text := dialogText(d)
	assert.Contains(t, text, "‹ own container (docker:far) ›")
	assert.Contains(t, text, "each fork gets a container of its own")
	spec := d.spec()
	assert.Equal(t, "docker:far", spec.On)
	assert.False(t, spec.InPlace)
	d.update(press("right"), dialogKeys)
	assert.Contains(t, dialogText(d), "‹ in place ›")
	assert.Empty(t, d.spec().On)
	assert.True(t, d.spec().InPlace)

	// No place elsewhere: worktree and in place only.
	d = newForkDialog(parent, data.transcript(0), 5, reg, "claude", runs)
	focusField(t, d, fieldWorkdir)
	d.update(press("right"), dialogKeys)
	assert.Contains(t, dialogText(d), "‹ in place ›")
}
