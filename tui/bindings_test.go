package tui

import (
	"fmt"
	"strings"
	"testing"

	"charm.land/bubbles/v2/key"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/script"
)

// TestEveryKeyHasHelpAndAHandler walks every screen's table: each key it
// answers has help that names it and says what it does, and a handler.
func TestEveryKeyHasHelpAndAHandler(t *testing.T) {
	tables := newKeyTables(DefaultKeyMap())
	ids := map[string]bool{}
	for _, kt := range tables.all() {
		require.NotEmpty(t, kt.id)
		assert.False(t, ids[kt.id], "%s: one table per id (the footer's cache goes by it)", kt.id)
		ids[kt.id] = true
		for _, b := range kt.keys {
			h := b.key.Help()
			what := fmt.Sprintf("%s: %v (%q)", kt.id, b.key.Keys(), h.Key)
			assert.NotEmpty(t, b.key.Keys(), "%s answers some key", what)
			assert.NotEmpty(t, h.Key, "%s has help that names its keys", what)
			assert.NotEmpty(t, h.Desc, "%s has help that says what it does", what)
			assert.NotNil(t, b.run, "%s has a handler", what)
		}
		if short := kt.short(); len(short) > 0 {
			assert.Equal(t, "quit", short[len(short)-1].Help().Desc, "%s: quit is last in the footer", kt.id)
		}
	}
}

// TestHelpNamesOnlyKeysItsHandlersServe: every key a table's help or
// footer names is answered by that table, the binding's own keys by the
// binding itself (no earlier binding takes them first), and no key of a
// binding is unreachable behind another.
func TestHelpNamesOnlyKeysItsHandlersServe(t *testing.T) {
	tables := newKeyTables(DefaultKeyMap())
	for _, kt := range tables.all() {
		assert.Empty(t, helpProblems(kt), kt.id)
	}
	// The check itself catches help that names a key no handler serves,
	// and a key taken by an earlier binding.
	b := func(label string, keys ...string) binding {
		return binding{key: key.NewBinding(key.WithKeys(keys...), key.WithHelp(label, "x")), run: do(nil)}
	}
	lies := keyTable{id: "lies", keys: []binding{b("x", "y")}}
	assert.Equal(t, []string{`"x" names x, which no binding serves`}, helpProblems(&lies))
	shadow := keyTable{id: "shadow", keys: []binding{b("a", "a"), b("b/a", "b", "a")}}
	assert.Equal(t, []string{`"b/a" names a, which "a" serves first`, `a of "b/a" is answered by "a" first`}, helpProblems(&shadow))
	brief := keyTable{id: "brief", keys: []binding{{key: b("a", "a").key, run: do(nil), footer: 1, brief: &key.Help{Key: "a/z", Desc: "x"}}}}
	assert.Equal(t, []string{`"a/z" names z, which no binding serves`}, helpProblems(&brief))
}

// helpProblems lists what kt's help says that its handlers do not do.
func helpProblems(kt *keyTable) []string {
	var out []string
	first := func(k string) *binding {
		for i := range kt.keys {
			for _, x := range kt.keys[i].key.Keys() {
				if x == k {
					return &kt.keys[i]
				}
			}
		}
		return nil
	}
	for i := range kt.keys {
		b := &kt.keys[i]
		labels := []string{b.key.Help().Key}
		if b.brief != nil {
			labels = append(labels, b.brief.Key)
		}
		for li, label := range labels {
			for _, k := range labelKeys(label) {
				switch got := first(k); {
				case got == nil:
					out = append(out, fmt.Sprintf("%q names %s, which no binding serves", label, k))
				case li == 0 && got != b:
					out = append(out, fmt.Sprintf("%q names %s, which %q serves first", label, k, got.key.Help().Key))
				}
			}
		}
		for _, k := range b.key.Keys() {
			if got := first(k); got != b {
				out = append(out, fmt.Sprintf("%s of %q is answered by %q first", k, b.key.Help().Key, got.key.Help().Key))
			}
		}
	}
	if kt.restHelp != nil && kt.rest == nil {
		out = append(out, fmt.Sprintf("%q names what no handler does", kt.restHelp.Key))
	}
	return out
}

// labelKeys reads the keys a help label names: "↑/k", "pgdn", "1-9",
// "shift+tab/↑", "/".
func labelKeys(label string) []string {
	if label == "/" {
		return []string{"/"}
	}
	names := map[string]string{"↑": "up", "↓": "down", "←": "left", "→": "right", "pgdn": "pgdown"}
	var out []string
	for _, part := range strings.Split(label, "/") {
		if r := []rune(part); len(r) == 3 && r[1] == '-' {
			for c := r[0]; c <= r[2]; c++ {
				out = append(out, string(c))
			}
			continue
		}
		if n, ok := names[part]; ok {
			part = n
		}
		out = append(out, part)
	}
	return out
}

// TestADisabledKeySaysWhy: a key that does not apply now says why in the
// status line, and does nothing else.
func TestADisabledKeySaysWhy(t *testing.T) {
	// No fork driver, no replayer; the cursor on the root's last message,
	// with no fork below it.
	d := newDriver(t, seedStore(t, 0), 140, 30)
	d.keys("enter", "G")
	require.Equal(t, screenTree, d.a.screen)
	for _, c := range [][2]string{
		{"f", "forking is not available here"},
		{"n", "nothing to find yet: / searches this tree"},
		{"c", "put the cursor on a fork (⑂) or on a message with forks below it"},
		{"x", " is not running (completed)"},
		{"R", "replay is not available here"},
		{"m", "running turns is not available here"},
	} {
		k, why := c[0], c[1]
		d.a.status = statusLine{}
		d.keys(k)
		assert.Contains(t, d.a.status.text, why, k)
		assert.Equal(t, levelWarn, d.a.status.level, k)
		assert.Contains(t, d.plain(), why, "%s: the footer says it", k)
		assert.Equal(t, "tree", d.a.keysNow().id, "%s opened nothing", k)
	}
	// Every binding of the tree that is off here says its own reason.
	tree := &d.a.tables.tree
	for i := range tree.keys {
		b := &tree.keys[i]
		why := b.why(d.a)
		if why == "" {
			continue
		}
		d.a.status = statusLine{}
		d.send(press(b.key.Keys()[0]))
		assert.Equal(t, why, d.a.status.text, b.key.Help().Key)
	}
	// With a driver, f opens the Fork dialog.
	st := seedStore(t, 0)
	w := newDriverWith(t, st, 140, 30, &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{}), DefaultHarness: "script"})
	w.keys("enter", "f")
	assert.NotNil(t, w.a.dialog)
}
