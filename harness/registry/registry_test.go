package registry

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
)

// TestEveryDescriptorIsWhole walks the registry: every backend says each
// thing tine asks of it, or says why it has none, so a new agent cannot
// be added with a piece missing.
func TestEveryDescriptorIsWhole(t *testing.T) {
	t.Parallel()
	for _, a := range Agents() {
		assert.Empty(t, missing(a), a.Name)
	}
	names := map[string]bool{}
	for _, a := range Agents() {
		assert.False(t, names[a.Name], "two backends are called %q", a.Name)
		names[a.Name] = true
	}
}

// TestMissingPiecesAreFound: the check above fails for a descriptor
// without each piece (so it can fail at all).
func TestMissingPiecesAreFound(t *testing.T) {
	t.Parallel()
	whole := Agents()[0]
	require.Empty(t, missing(whole))
	cut := []func(*harness.Agent){
		func(a *harness.Agent) { a.Display = "" },
		func(a *harness.Agent) { a.New = nil },
		func(a *harness.Agent) { a.Needs = nil },
		func(a *harness.Agent) { a.Sessions = nil },
		func(a *harness.Agent) { a.Sessions = &harness.Sessions{} },
		func(a *harness.Agent) { a.CLI = nil },
		func(a *harness.Agent) { a.CLI = &harness.CLI{Bin: "x"} },
		func(a *harness.Agent) { a.Open = nil },
		func(a *harness.Agent) { a.Record = nil },
		func(a *harness.Agent) { a.Record = &harness.Recording{} },
		func(a *harness.Agent) { a.Caps.Tools = !a.Caps.Tools },
		func(a *harness.Agent) { a.Carry = nil },
		func(a *harness.Agent) { a.Carry = &harness.Carry{} },
	}
	for i, c := range cut {
		a := whole
		c(&a)
		assert.NotEmpty(t, missing(a), "cut %d", i)
	}
}

// missing lists what descriptor a lacks.
func missing(a harness.Agent) []string {
	var out []string
	need := func(ok bool, what string) {
		if !ok {
			out = append(out, what)
		}
	}
	either := func(has bool, why, what string) {
		need(has != (why != ""), what+": exactly one of it and the reason it has none")
	}
	need(a.Name != "" && a.Name == strings.ToLower(a.Name) && !strings.ContainsAny(a.Name, " /"), "a name fit for --harness")
	need(a.Display != "", "a display name")
	need(len(a.Needs) > 0, "what it needs (tine harnesses)")
	need(a.New != nil, "New")
	if a.New != nil {
		h := a.New(harness.Setup{})
		need(h != nil && h.Name() == a.Name, "a harness of its name")
		if h != nil {
			// A harness may say Record once it knows its agent (Claude
			// Code behind ACP); the rest is the descriptor's.
			hc := h.Capabilities()
			need(!hc.Record || a.Record != nil, "a Recording for a harness that says Record")
			hc.Record = a.Caps.Record
			need(hc == a.Caps, "a harness whose capabilities are the descriptor's")
			_, describes := h.(harness.Describer)
			need(describes, "a harness that says whether it is installed (Describer)")
			d, described := h.(harness.Described)
			need(described && d.Descriptor().Name == a.Name, "a harness that knows its descriptor (Described)")
		}
	}
	either(a.Sessions != nil, a.NoSessions, "Sessions")
	if s := a.Sessions; s != nil {
		need(s.Parse != nil, "Sessions.Parse")
		need(s.Detect != nil || s.Dirs == nil, "Sessions.Detect for a format found in folders")
		need((s.IDField == "") == (s.ParentField == ""), "both Sessions.IDField and ParentField, or neither")
		need(s.ParseTail == nil || s.Appends, "Sessions.ParseTail only for a format that appends")
	}
	either(a.CLI != nil, a.NoCLI, "CLI")
	if c := a.CLI; c != nil {
		need(c.Bin != "" && c.BinVar != "" && c.Package != "", "CLI.Bin, BinVar and Package")
	}
	either(a.Open != nil, a.NoOpen, "Open")
	need(a.Open == nil || a.CLI != nil, "a CLI to Open runs in")
	either(a.Carry != nil, a.NoCarry, "Carry")
	if c := a.Carry; c != nil {
		need(len(c.State) > 0 && c.Config != nil && c.Env != nil && c.Locate != nil, "Carry's State, Config, Env and Locate")
		need(a.CLI != nil && a.Caps.OwnSessions, "a CLI of an agent with sessions of its own to Carry")
	}
	either(a.Record != nil, a.NoRecord, "Record")
	if r := a.Record; r != nil {
		need(r.Upstream != nil, "Record.Upstream")
	}
	need(!a.Caps.Record || a.Record != nil, "a Recording for a backend whose capabilities say Record")
	need(a.API == nil || !a.Caps.OwnSessions, "API only for a model API")
	if api := a.API; api != nil {
		need(api.KeyEnv != "" && api.URLEnv != "" && api.ModelEnv != "" && api.DefaultURL != "", "API's variables and default URL")
	}
	return out
}

// TestOnlyMainNamesAnAgent: outside the backends' own packages, only main
// and this registry import one; screens, the replay, the importer, the
// driver and the store ask the registry. And no backend imports another.
func TestOnlyMainNamesAnAgent(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	backends := map[string]bool{}
	entries, err := os.ReadDir(filepath.Join(root, "harness"))
	require.NoError(t, err)
	for _, e := range entries {
		switch e.Name() {
		case "fork", "importer", "worktree", "registry", "place", "turns", "merge":
		default:
			if e.IsDir() {
				backends["tine/harness/"+e.Name()] = true
			}
		}
	}
	require.Contains(t, backends, "tine/harness/claude")
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || strings.HasPrefix(n, ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := "tine/" + filepath.ToSlash(rel)
		if rel == "." || pkg == "tine/harness/registry" {
			return nil // main, and this list
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if backends[p] && p != pkg {
				t.Errorf("%s imports %s: ask the registry instead", path, p)
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, checked, 50, "the walk found the code")
}
