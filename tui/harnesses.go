package tui

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/worktree"
	"tine/model"
)

// describeTimeout bounds how long one harness may take to say whether it is
// installed (an agent's CLI asked for its version).
const describeTimeout = 5 * time.Second

// repoState is what the Fork screen knows of the directory an agent's
// forks start from: whether each can get a git worktree of its own
// (rule 10 in ARCHITECTURE.md).
type repoState struct {
	checked bool
	dir     string
	problem string // "" when dir is in a git repository
	// uncommitted counts dir's files that differ from its HEAD: a fork's
	// worktree starts with them as they are now.
	uncommitted int
	// fatal: an agent cannot run there at all, not even in place (no
	// directory recorded, or it is gone).
	fatal bool
}

// harnessInfoMsg answers describeHarnesses for the dialog of generation gen.
type harnessInfoMsg struct {
	gen   int
	descs map[string]harness.Description
	repo  repoState
}

// describeHarnesses asks every harness that can say so whether it is
// installed here (through cache), and checks whether dir is in a git
// repository: I/O that stays off the UI goroutine.
func describeHarnesses(ctx context.Context, gen int, cache *descCache, reg *harness.Registry, dir string) tea.Cmd {
	return func() tea.Msg {
		msg := harnessInfoMsg{gen: gen, repo: repoState{checked: true, dir: dir}}
		done := make(chan struct{})
		go func() {
			defer close(done)
			msg.descs = cache.get(ctx, reg)
		}()
		msg.repo.problem, msg.repo.fatal = repoProblem(ctx, dir)
		if msg.repo.problem == "" {
			ctx, cancel := context.WithTimeout(ctx, describeTimeout)
			msg.repo.uncommitted, _ = worktree.Uncommitted(ctx, dir) // unknown is said as none
			cancel()
		}
		<-done
		return msg
	}
}

// descCacheFor is how long what harnesses said of themselves is kept: a
// CLI installed meanwhile is seen soon enough. (An agent's CLI is asked
// once per version of its file: agentproc.Probed.)
const descCacheFor = time.Minute

// descCache keeps the harnesses' descriptions for descCacheFor.
type descCache struct {
	mu    sync.Mutex
	at    time.Time
	descs map[string]harness.Description
}

// get returns every describable harness's description, asking them all
// at once when what is kept is missing or stale.
func (c *descCache) get(ctx context.Context, reg *harness.Registry) map[string]harness.Description {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.descs != nil && time.Since(c.at) < descCacheFor {
		return c.descs
	}
	descs := map[string]harness.Description{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range reg.Names() {
		h, err := reg.Get(name)
		if err != nil {
			continue
		}
		if _, ok := h.(harness.Describer); !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					logPanic("describe "+name, r) // the harness is shown undescribed
				}
			}()
			ctx, cancel := context.WithTimeout(ctx, describeTimeout)
			defer cancel()
			desc, _ := reg.Describe(ctx, name)
			mu.Lock()
			descs[name] = desc
			mu.Unlock()
		}()
	}
	wg.Wait()
	// Descriptions that lack what a CLI did not say in time are asked
	// again next time (agentproc keeps each CLI's answer once it comes).
	complete := true
	for _, d := range descs {
		complete = complete && d.Note == ""
	}
	if ctx.Err() == nil && complete {
		c.descs, c.at = descs, time.Now()
	}
	return descs
}

// repoProblem says why dir cannot give forks worktrees of their own, ""
// when it can; fatal when an agent cannot run there at all.
func repoProblem(ctx context.Context, dir string) (problem string, fatal bool) {
	if dir == "" {
		return "this run has no working directory recorded, so an agent has nowhere to run", true
	}
	ctx, cancel := context.WithTimeout(ctx, describeTimeout)
	defer cancel()
	_, _, err := worktree.Repo(ctx, dir)
	switch {
	case err == nil:
		return "", false
	case errors.Is(err, worktree.ErrMissing):
		return fmt.Sprintf("the run's directory %s no longer exists", model.SafeText(dir)), true
	case errors.Is(err, worktree.ErrNotRepo):
		return fmt.Sprintf("%s is not a git repository, so forks cannot get worktrees of their own", model.SafeText(dir)), false
	}
	return model.OneLine(err.Error(), 200), false
}

// apiOf is how model API name is configured (its descriptor's API); ok
// is false for a harness that is no model API.
func apiOf(reg *harness.Registry, name string) (api harness.API, ok bool) {
	if ag, known := reg.Agent(name); known && ag.API != nil {
		return *ag.API, true
	}
	return harness.API{}, false
}

// apiPointer is apiOf as a pointer, nil for a harness that is no model
// API.
func apiPointer(reg *harness.Registry, name string) *harness.API {
	if api, ok := apiOf(reg, name); ok {
		return &api
	}
	return nil
}

// apiSettings are what the dialog holds for one API harness: what was typed,
// with the environment behind it.
type apiSettings struct {
	model, baseURL, key string
}

// apiProblem checks an API harness's settings before launch: the base URL
// parses with an http or https scheme; a key is there when the API needs
// one (the vendor's own endpoint); a model is named somewhere. It never
// repeats the key. typed says whether the dialog asking has fields to type
// them in (the Fork screen has; the next-turn dialog has not).
func apiProblem(name string, api harness.API, s apiSettings, getenv func(string) string, parent model.Run, typed bool) string {
	raw := s.baseURL
	from := "base URL"
	if raw == "" {
		raw, from = getenv(api.URLEnv), api.URLEnv
	}
	vendor := raw == ""
	if raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			shown := model.OneLine(raw, 60)
			if err == nil {
				shown = model.OneLine(u.Redacted(), 60)
			}
			return fmt.Sprintf("%s must be an http:// or https:// URL with a host, not %q", from, shown)
		}
		def, _ := url.Parse(api.DefaultURL)
		vendor = strings.EqualFold(u.Hostname(), def.Hostname())
	}
	if vendor && s.key == "" && getenv(api.KeyEnv) == "" {
		host := strings.TrimPrefix(api.DefaultURL, "https://")
		host, _, _ = strings.Cut(host, "/")
		if !typed {
			return fmt.Sprintf("%s needs an API key for %s: set %s (a local server, in %s, needs none)", name, host, api.KeyEnv, api.URLEnv)
		}
		return fmt.Sprintf("%s needs an API key for %s: set %s or type one under API key (a local server's base URL needs none)", name, host, api.KeyEnv)
	}
	if s.model == "" && getenv(api.ModelEnv) == "" && (parent.Harness != name || parent.Model == "") {
		if !typed {
			return fmt.Sprintf("%s needs a model: set %s", name, api.ModelEnv)
		}
		return fmt.Sprintf("%s needs a model: type one under model (or set %s)", name, api.ModelEnv)
	}
	return ""
}

// launchDriver is d, or a copy of it whose API harness name is made with
// the base URL and key typed in the dialog: the driver's own registry is
// shared by every launch, so a launch's settings go on a copy.
func launchDriver(d *fork.Driver, name string, s apiSettings) *fork.Driver {
	if _, ok := apiOf(d.Harnesses, name); !ok || (s.baseURL == "" && s.key == "") {
		return d
	}
	reg, err := d.Harnesses.Rebuilt(name, harness.Setup{BaseURL: s.baseURL, APIKey: s.key})
	if err != nil {
		return d // a harness registered by hand: it keeps its own settings
	}
	c := *d
	c.Harnesses = reg
	return &c
}

// harnessFit is what a harness can do with the fork the dialog describes.
type harnessFit struct {
	caps  harness.Capabilities
	agent bool // it keeps sessions of its own (an agent CLI or ACP)
	// handoff says why this fork, with this harness, must be a handoff;
	// "" when the harness can branch the session itself.
	handoff string
	// blocked says why this harness cannot make this fork at all.
	blocked string
}

// fitOf mirrors the checks harness.Driver.Fork makes before anything runs,
// on the tree already loaded: for an agent, whether one of its sessions
// holds the first k messages of parent (and, for one that forks only at a
// session's end, ends there); for any other harness, whether it can fork
// at k. runs holds the tree's runs by id.
func fitOf(reg *harness.Registry, name string, runs map[string]model.Run, parent model.Run, k, length int) harnessFit {
	h, err := reg.Get(name)
	if err != nil {
		return harnessFit{blocked: errorText(err)}
	}
	f := harnessFit{caps: h.Capabilities()}
	f.agent = f.caps.OwnSessions
	if !f.agent {
		if !f.caps.ForkAtK && k != length {
			f.blocked = fmt.Sprintf("%s forks only at a run's end", name)
		}
		return f
	}
	origin, ok := originIn(runs, parent, k, name)
	switch {
	case !ok && parent.Harness == name:
		f.handoff = fmt.Sprintf("no %s session holds these %s", name, plural(k, "message"))
	case !ok:
		made := "this"
		if parent.Harness != "" {
			made += " " + model.SafeText(parent.Harness)
		}
		f.handoff = fmt.Sprintf("%s cannot branch %s session", name, made)
	case !f.caps.ForkAtK && origin.Len() != k:
		f.handoff = fmt.Sprintf("%s forks only at a session's end", name)
	}
	return f
}

// originIn is the run whose native session of agent name holds the first
// k messages of r: r's own, or an ancestor's when r never ran (the search
// harness.Driver makes, over loaded runs).
func originIn(runs map[string]model.Run, r model.Run, k int, name string) (model.Run, bool) {
	o, err := fork.OriginOf(r, k, name, func(id string) (model.Run, error) {
		if p, ok := runs[id]; ok {
			return p, nil
		}
		return model.Run{}, fmt.Errorf("run %s is not loaded", id)
	})
	if err != nil || o == nil {
		return model.Run{}, false
	}
	if o.RunID == r.ID {
		return r, true
	}
	return runs[o.RunID], true
}

// capsLine says briefly what a harness can do.
func capsLine(c harness.Capabilities) string {
	var s []string
	switch {
	case c.ForkAtK:
		s = append(s, "forks at any checkpoint")
	case c.Fork:
		s = append(s, "forks at the end only")
	default:
		s = append(s, "cannot fork")
	}
	if c.Tools {
		s = append(s, "runs tools")
	}
	if c.Stream {
		s = append(s, "streams")
	}
	return strings.Join(s, " · ")
}

// hereLine says in a few words whether a harness can run here: an
// agent's CLI installed (with its version), an API's key present, or
// nothing needed. problem is the whole story when it cannot run.
func hereLine(name string, api *harness.API, desc *harness.Description, getenv func(string) string) (here, problem string) {
	if api != nil {
		if getenv(api.KeyEnv) != "" {
			return "API · key from " + api.KeyEnv, ""
		}
		return "API · no " + api.KeyEnv, ""
	}
	if desc == nil {
		return "here", ""
	}
	if !desc.Installed {
		problem = desc.Problem
		if problem == "" && len(desc.Needs) > 0 {
			problem = name + " needs " + strings.Join(desc.Needs, ", ")
		}
		if problem == "" {
			problem = name + " is not installed here"
		}
		return "not installed", model.OneLine(problem, 300)
	}
	here = "installed"
	switch {
	case desc.Version != "":
		here += " (" + model.OneLine(desc.Version, 24) + ")"
	case desc.Note != "":
		// Its CLI did not say its version in time: a busy machine, no
		// reason to refuse it.
		here += " (version not known yet)"
	}
	if desc.Problem != "" {
		return here + " but cannot run", model.OneLine(desc.Problem, 300)
	}
	return here, ""
}

// forTUI rephrases the driver's errors, which name command-line flags, in
// terms of the dialog's own fields.
var forTUI = strings.NewReplacer(
	"pass --handoff to do that", "turn on handoff to do that",
	"fork again with --handoff", "fork again with handoff on",
	"pass --in-place to run them there, sharing it", "choose “in place” under work in to run them there, sharing it",
	"pick one with --harness", "pick another harness",
	"pass --model or set", "type a model or set",
	"--max-tokens is", "max tokens is",
	"--max-cost is", "max cost is",
	"--max-cost $", "max cost $",
	"with --max-tokens instead", "with max tokens instead",
	"fork: --replace-original goes with --regenerate", "hiding the original goes with letting the model answer again: clear the message, or keep the original visible",
)

func tuiError(err error) string { return forTUI.Replace(errorText(err)) }
