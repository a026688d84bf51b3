package main

// Shell completion. `tine completion bash|zsh|fish` prints a script
// (completion/), and on every Tab the script asks `tine __complete WORD...`
// what the word being typed may become. The answers come from the commands
// themselves, so they cannot drift from them: their flag sets (each command
// asked for its flags, env.probe, never run), their synopses (command.args),
// the values their flags take (flags.oneOf, hint, path), and the runs in the
// database, read read-only (store.RunRefs).

import (
	"context"
	"embed"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"tine/model"
	"tine/store"
)

//go:embed completion/tine.bash completion/tine.zsh completion/tine.fish
var completionScripts embed.FS

// shells are those tine prints a completion script for.
var shells = []string{"bash", "zsh", "fish"}

// completeCmd is the hidden command the scripts call.
const completeCmd = "__complete"

func cmdCompletion(_ context.Context, e *env, args []string) error {
	f := newFlags(e, "completion", strings.Join(shells, "|"),
		"Print the script that makes a shell complete tine's commands, their flags and the\n"+
			"flags' values, and the ids and names of the runs in the database. Load it with\n"+
			"  source <(tine completion bash)        in ~/.bashrc\n"+
			"  source <(tine completion zsh)         in ~/.zshrc, after compinit\n"+
			"  tine completion fish | source         in ~/.config/fish/config.fish\n"+
			"or save it where the shell loads completions from (README: Shell completion).")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if !slices.Contains(shells, pos[0]) {
		return usagef("completion: no script for %q: %s", pos[0], orList(shells))
	}
	b, err := completionScripts.ReadFile("completion/tine." + pos[0])
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(b)
	return err
}

// candidate is one word a completion offers, and what it is.
type candidate struct{ value, desc string }

// completion is what the word being typed may become: a file's path, or
// one of values.
type completion struct {
	files  bool
	values []candidate
}

// cmdComplete answers a completion script. words are the command line
// after "tine" up to the cursor, the last one the word being typed ("" for
// a new one). It prints "files" when the shell should complete a path,
// else "words" and then a candidate a line, a tab and what it is after it.
// It never fails: a database it cannot read gives no runs.
func cmdComplete(ctx context.Context, e *env, words []string) error {
	if len(words) == 0 {
		words = []string{""}
	}
	c := completeWords(ctx, e, words)
	if c.files {
		_, err := fmt.Fprintln(e.stdout, "files")
		return err
	}
	var b strings.Builder
	b.WriteString("words\n")
	for _, cd := range c.values {
		b.WriteString(cd.value)
		if cd.desc != "" {
			b.WriteString("\t" + cd.desc)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(e.stdout, b.String())
	return err
}

func completeWords(ctx context.Context, e *env, words []string) completion {
	cur, before := words[len(words)-1], words[:len(words)-1]
	// Global flags come before the command (dispatch).
	i := 0
	for ; i < len(before) && strings.HasPrefix(before[i], "-"); i++ {
		switch a := before[i]; {
		case a == "--db" || a == "-db":
			if i+1 == len(before) {
				return completion{files: true}
			}
			i++
			e.db = before[i]
		case strings.HasPrefix(a, "--db="):
			e.db = strings.TrimPrefix(a, "--db=")
		}
	}
	if i == len(before) {
		if strings.HasPrefix(cur, "-") {
			return offer(cur, []candidate{{"--db", "the database's path"}, {"--record", "the TUI's forks are recorded"},
				{"--help", "tine's commands"}, {"--version", "tine's version"}})
		}
		var cs []candidate
		for _, c := range commands() {
			cs = append(cs, candidate{c.name, c.summary})
		}
		return offer(cur, append(cs, candidate{"help", "tine's commands"}))
	}
	var c command
	for _, cc := range commands() {
		if cc.name == before[i] {
			c = cc
		}
	}
	f := flagsOf(c)
	if f == nil {
		return completion{}
	}
	// The arguments typed so far, as parse reads them.
	var pos []string
	var value *flag.Flag // the flag whose value cur is
	dashes := false
	rest := before[i+1:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		switch {
		case dashes || a == "-" || !strings.HasPrefix(a, "-"):
			pos = append(pos, a)
		case a == "--":
			dashes = true
		case strings.Contains(a, "="):
			if name, v, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); name == "db" {
				e.db = v
			}
		default:
			fl := f.Lookup(strings.TrimLeft(a, "-"))
			if fl == nil || isBoolFlag(fl) {
				continue
			}
			if j+1 == len(rest) {
				value = fl
				continue
			}
			j++
			if fl.Name == "db" {
				e.db = rest[j]
			}
		}
	}
	switch {
	case value != nil:
		if f.paths[value.Name] {
			return completion{files: true}
		}
		return offer(cur, words2candidates(append(f.choices[value.Name], f.hints[value.Name]...)))
	case !dashes && strings.HasPrefix(cur, "-"):
		if strings.Contains(cur, "=") {
			return completion{} // values are completed after a space: --format md
		}
		var cs []candidate
		f.VisitAll(func(fl *flag.Flag) {
			if fl.Usage != "" { // no usage: a flag for tine's own processes
				_, usage := flag.UnquoteUsage(fl)
				cs = append(cs, candidate{dashed(fl.Name), model.OneLine(usage, 70)})
			}
		})
		return offer(cur, cs)
	}
	switch kind, choices := operand(c.args, pos); kind {
	case "runs":
		return completion{values: runCandidates(ctx, e, cur, dashes)}
	case "files":
		return completion{files: true}
	default:
		return offer(cur, words2candidates(choices))
	}
}

// flagsOf is command c's flag set, asked of the command itself: parse
// gives it back and stops the command before it does anything (env.probe).
func flagsOf(c command) *flags {
	if c.run == nil {
		return nil
	}
	pe := &env{stdout: io.Discard, stderr: io.Discard, stdin: strings.NewReader(""), probe: true}
	_ = c.run(context.Background(), pe, nil)
	return pe.probed
}

func isBoolFlag(fl *flag.Flag) bool {
	b, ok := fl.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// synopsisWord is a word of a synopsis, or a [bracketed] group of them,
// which may repeat (...).
var synopsisWord = regexp.MustCompile(`\[[^\]]*\](?:\.\.\.)?|\S+`)

// operand reads a command's synopsis (command.args) for its positional
// argument after pos: "runs" for RUN or FORK, "files" for PATH, else the
// words it may be (a word in lowercase is itself; a|b is either). "..."
// repeats the last; " | " separates forms (worktree: rm RUN... | prune);
// a bracketed group that starts with a dash is a flag, not an operand.
func operand(synopsis string, pos []string) (kind string, choices []string) {
	for _, form := range strings.Split(synopsis, " | ") {
		var ops []string
		for _, w := range synopsisWord.FindAllString(form, -1) {
			if w = strings.Trim(w, "[]"); w != "" && !strings.HasPrefix(w, "-") {
				ops = append(ops, w)
			}
		}
		opAt := func(k int) (string, bool) {
			if k < len(ops) {
				return ops[k], true
			}
			if len(ops) > 0 && strings.HasSuffix(ops[len(ops)-1], "...") {
				return ops[len(ops)-1], true
			}
			return "", false
		}
		fits := true
		for k, p := range pos {
			op, ok := opAt(k)
			if !ok || (isLiteral(op) && !slices.Contains(literals(op), p)) {
				fits = false
				break
			}
		}
		op, ok := opAt(len(pos))
		if !fits || !ok {
			continue
		}
		switch strings.TrimSuffix(op, "...") {
		case "RUN", "FORK":
			return "runs", nil
		case "PATH":
			return "files", nil
		}
		if isLiteral(op) {
			choices = append(choices, literals(op)...)
		}
	}
	return "", choices
}

// isLiteral says a synopsis word is the words it may be (rm, bash|zsh),
// not a placeholder (RUN, N).
func isLiteral(op string) bool { return op == strings.ToLower(op) }

func literals(op string) []string { return strings.Split(strings.TrimSuffix(op, "..."), "|") }

func words2candidates(ws []string) []candidate {
	cs := make([]candidate, len(ws))
	for i, w := range ws {
		cs[i] = candidate{value: w}
	}
	return cs
}

// offer is the candidates that start with cur.
func offer(cur string, cs []candidate) completion {
	var out []candidate
	for _, c := range cs {
		if strings.HasPrefix(c.value, cur) {
			out = append(out, c)
		}
	}
	return completion{values: out}
}

// maxRunCandidates bounds the runs offered for one Tab: the newest.
const maxRunCandidates = 500

// runCandidates are the runs whose short id (the whole id once cur is
// longer, or when two share it) or name starts with cur, each said by its
// name or id and its tree's title. A name that would not stay one line is
// left out, and so is one that would read as a flag before a `--`
// (dashes); a title is made safe text.
func runCandidates(ctx context.Context, e *env, cur string, dashes bool) []candidate {
	path, err := e.dbPath()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second) // a Tab must not hang on a locked database
	defer cancel()
	refs, err := store.RunRefs(ctx, path, cur, maxRunCandidates)
	if err != nil {
		return nil
	}
	shorts := map[string]int{}
	for _, r := range refs {
		shorts[model.ShortID(r.ID)]++
	}
	var out []candidate
	for _, r := range refs {
		say := func(parts ...string) string {
			if r.Hidden {
				parts = append(parts, "hidden")
			}
			return model.OneLine(strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), " · "), 70)
		}
		if strings.HasPrefix(r.ID, cur) {
			id := model.ShortID(r.ID)
			if len(cur) > len(id) || shorts[id] > 1 {
				id = r.ID
			}
			out = append(out, candidate{id, say(model.OneLine(r.Name, 0), r.Title)})
		}
		if r.Name != "" && strings.HasPrefix(r.Name, cur) && model.OneLine(r.Name, 0) == r.Name &&
			(dashes || !strings.HasPrefix(r.Name, "-")) {
			out = append(out, candidate{r.Name, say(model.ShortID(r.ID), r.Title)})
		}
	}
	return out
}
