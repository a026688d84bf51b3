package main

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/openai"
	"tine/model"
	"tine/store"
	"tine/tui"
)

// demoFS holds the demo trees: *.tree.json describe a conversation and its
// forks; *.jsonl are plain openai-format runs.
//
//go:embed testdata/demo/*.tree.json testdata/demo/*.jsonl
var demoFS embed.FS

// demoTree is the demo's own description of a conversation and its forks,
// with messages in the openai shape.
type demoTree struct {
	Title     string          `json:"title"`
	Cwd       string          `json:"cwd"`
	Harness   string          `json:"harness"`
	Model     string          `json:"model"`
	CreatedAt time.Time       `json:"created_at"`
	Messages  json.RawMessage `json:"messages"`
	Forks     []demoFork      `json:"forks"`
}

type demoFork struct {
	Name     string          `json:"name"`
	At       string          `json:"at"`
	Status   model.Status    `json:"status"`
	Error    string          `json:"error"`
	Harness  string          `json:"harness"`
	Messages json.RawMessage `json:"messages"`
	Forks    []demoFork      `json:"forks"`
}

// loadDemo fills st with the demo trees. Their projects are folders of
// their own under root (the demo's own temporary folder), empty but
// there: a fork's check runs in them.
func loadDemo(ctx context.Context, st *store.Store, root string) error {
	entries, err := fs.ReadDir(demoFS, "testdata/demo")
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := path.Join("testdata/demo", e.Name())
		data, err := demoFS.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(p, ".tree.json"):
			err = loadDemoTree(ctx, st, data, p, root)
		case strings.HasSuffix(p, ".jsonl"):
			err = loadDemoRun(ctx, st, data, p, root)
		}
		if err != nil {
			return fmt.Errorf("demo %s: %w", e.Name(), err)
		}
	}
	return nil
}

func loadDemoRun(ctx context.Context, st *store.Store, data []byte, name, root string) error {
	t, err := openai.Parse(data, name)
	if err != nil {
		return err
	}
	cwd, err := demoProject(root, "tine")
	if err != nil {
		return err
	}
	start := time.Now().Add(-3*time.Hour - time.Duration(len(t.Messages))*40*time.Second)
	stamp(t.Messages, start)
	t.Run.Title = "Tidy the store package: a long refactoring session"
	t.Run.Harness, t.Run.Model, t.Run.Cwd, t.Run.CreatedAt, t.Run.Status = "codex", "gpt-5.1-codex", cwd, start, model.Completed
	t.Run.CostUSD = demoCost(t.Run.Model, t.Messages)
	return st.CreateRun(ctx, &t.Run, t.Messages)
}

func loadDemoTree(ctx context.Context, st *store.Store, data []byte, name, projects string) error {
	var d demoTree
	if err := json.Unmarshal(data, &d); err != nil {
		return err
	}
	t, err := openai.Parse(d.Messages, name)
	if err != nil {
		return err
	}
	// A tree without a project (a model API's chat) gets one too, named
	// after its file: a check typed for its forks runs there, not in the
	// directory the demo was started from.
	project := strings.TrimSuffix(path.Base(name), ".tree.json")
	if d.Cwd != "" {
		project = path.Base(d.Cwd)
	}
	cwd, err := demoProject(projects, project)
	if err != nil {
		return err
	}
	// Place the demo in the recent past so ages read naturally.
	shift := time.Since(d.CreatedAt) - 26*time.Hour
	created := d.CreatedAt.Add(shift)
	stamp(t.Messages, created)
	root := model.Run{Title: d.Title, Cwd: cwd, Harness: d.Harness, Model: d.Model, CreatedAt: created, Status: model.Completed,
		CostUSD: demoCost(d.Model, t.Messages)}
	if err := st.CreateRun(ctx, &root, t.Messages); err != nil {
		return err
	}
	return loadDemoForks(ctx, st, root, t.Messages, d.Forks, created)
}

// demoProject is the demo project name's folder under root, made.
func demoProject(root, name string) (string, error) {
	dir := filepath.Join(root, "projects", name)
	return dir, os.MkdirAll(dir, 0o700)
}

// demoCost is what msgs' own usage cost at model's list price, as the
// agent that ran them would have reported it (the demo's runs are made
// up, so nothing reported it).
func demoCost(name string, msgs []model.Message) float64 {
	p, ok := model.PriceOf(name)
	if !ok {
		return 0
	}
	usd := 0.0
	for _, m := range msgs {
		usd += p.Cost(m.Usage)
	}
	return usd
}

// loadDemoForks makes forks the way `tine fork` does: the asked boundary is
// resolved and snapped, the fork is one row, then its own messages follow.
func loadDemoForks(ctx context.Context, st *store.Store, parent model.Run, prefix []model.Message, forks []demoFork, at time.Time) error {
	for i, f := range forks {
		cut, err := model.Resolve(prefix, model.ContinueFrom(f.At))
		if err != nil {
			return fmt.Errorf("fork %s: %w", f.Name, err)
		}
		var msgs []model.Message
		if len(f.Messages) > 0 && string(f.Messages) != "[]" {
			t, err := openai.Parse(f.Messages, f.Name)
			if err != nil {
				return fmt.Errorf("fork %s: %w", f.Name, err)
			}
			msgs = t.Messages
		}
		created := at.Add(time.Duration(i+1) * 47 * time.Minute)
		stamp(msgs, created)
		fork := model.Run{ParentID: parent.ID, ForkAt: cut.K, ForkStep: cut.Step, Asked: cut.Asked, SnapReason: cut.Reason,
			Name: f.Name, Harness: f.Harness, Status: f.Status, Error: f.Error, CreatedAt: created, Cwd: parent.Cwd}
		if fork.Harness == "" {
			fork.Harness, fork.Model = parent.Harness, parent.Model
			fork.CostUSD = demoCost(fork.Model, msgs)
		}
		if fork.Status == model.Completed || fork.Status == model.Failed {
			fork.FinishedAt = created.Add(time.Duration(len(msgs)+1) * 20 * time.Second)
		}
		if err := st.CreateRun(ctx, &fork, msgs); err != nil {
			return fmt.Errorf("fork %s: %w", f.Name, err)
		}
		full := append(append([]model.Message(nil), prefix[:cut.K]...), msgs...)
		if err := loadDemoForks(ctx, st, fork, full, f.Forks, created); err != nil {
			return err
		}
	}
	return nil
}

// stamp gives messages times 40 seconds apart from start.
func stamp(msgs []model.Message, start time.Time) {
	for i := range msgs {
		msgs[i].Time = start.Add(time.Duration(i) * 40 * time.Second)
	}
}

func cmdDemo(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "demo", "[--keep]", "Open the TUI on a fresh temporary database holding demo trees: tool-call\nbatches, a tree with forks at different boundaries, and a 2,400-message run.")
	keep := f.Bool("keep", false, "keep the temporary database and print its path on exit")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "tine-demo-")
	if err != nil {
		return err
	}
	defer func() {
		if !*keep { // read on the way out: forks left running keep it
			os.RemoveAll(dir)
		}
	}()
	st, err := store.Open(path.Join(dir, "demo.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	if err := loadDemo(ctx, st, dir); err != nil {
		return err
	}
	if err := requireTerminal(); err != nil {
		return err
	}
	follow := "tine --db " + shellQuote(st.Path()) + " ls"
	exit, err := tui.Run(ctx, st, tui.Options{Title: "demo", Driver: demoDriver(st, apiFlags{}), Agents: backends(harness.Setup{}, true),
		Offline:    "the demo's sessions are made up, so no agent could continue them; the demo forks offline, through script",
		Background: tuiBackground{db: st.Path(), ag: agentFlags{demo: true}}, Follow: follow})
	if s := exit.String(); s != "" {
		fmt.Fprintln(e.stdout, "tine: "+s)
	}
	switch {
	case len(exit.Kept) > 0 || len(exit.Stopping) > 0:
		// Forks go on in it: it stays, whatever --keep said.
		*keep = true
		fmt.Fprintf(e.stdout, "demo database kept at %s, for the forks that go on in it (open it with: tine --db %s)\n",
			model.SafeText(st.Path()), shellQuote(st.Path()))
	case *keep:
		fmt.Fprintf(e.stdout, "demo database kept at %s (open it with: tine --db %s)\n", model.SafeText(st.Path()), shellQuote(st.Path()))
	}
	return err
}

// demoDriver forks offline, through the script harness: the demo's
// sessions were made up, so no agent could continue them; a model API
// goes where api says (the base URL and key typed in the Fork screen).
// The TUI's background turns in the demo get it too (run-turns --demo).
func demoDriver(st *store.Store, api apiFlags) *fork.Driver {
	return &fork.Driver{Store: st, Harnesses: backends(harness.Setup{BaseURL: api.baseURL, APIKey: api.apiKey, Paced: true}, false),
		DefaultHarness: "script"}
}

// shellQuote is s as one word for a POSIX shell, quoted only when it
// needs to be.
func shellQuote(s string) string {
	s = model.SafeText(s)
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./~+=:,@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
