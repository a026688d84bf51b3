package tui

import (
	"context"
	"testing"

	tea "charm.land/bubbletea/v2"
)

// BenchmarkTreeFrame renders a whole 200x50 tree screen frame on a
// 10,000-message run while the cursor moves: the target is 2 ms or less.
func BenchmarkTreeFrame(b *testing.B) {
	a := New(nil, Options{})
	a.Update(tea.WindowSizeMsg{Width: 200, Height: 50})
	a.openTree(treeLoadedMsg{data: longTree(10_000)})
	// Markdown renders off the UI goroutine (renderMarkdown's command is
	// not run here), so the frame measures the list and the pane's layout.
	down := press("j")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.Update(down)
		_ = a.View()
	}
}

// BenchmarkOpenTree10k reads a 10,000-message run from the store and lays
// it out as a tree: the target is 100 ms or less.
func BenchmarkOpenTree10k(b *testing.B) {
	st := seedStore(b, 10_000)
	trees, err := st.Trees(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var id string
	for _, t := range trees {
		if t.Messages == 10_000 {
			id = t.Root.ID
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		data, err := LoadTree(context.Background(), st, id, nil)
		if err != nil {
			b.Fatal(err)
		}
		ts := newTreeScreen(data)
		if len(ts.rows) != 10_000 {
			b.Fatal(len(ts.rows))
		}
	}
}

// BenchmarkTreeFrame200Forks renders a whole 200x50 tree screen frame on a
// run with 200 forks (four deep) while the cursor moves: the target is
// 2 ms or less.
func BenchmarkTreeFrame200Forks(b *testing.B) {
	a := New(nil, Options{})
	a.Update(tea.WindowSizeMsg{Width: 200, Height: 50})
	a.openTree(treeLoadedMsg{data: forkTree(200)})
	down := press("j")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.Update(down)
		_ = a.View()
	}
}

// BenchmarkTreeOverview200Forks is a frame after each overview key on the
// 200-fork run: fold from depth 1, jump to the next fork with changes
// (which unfolds its parents), unfold all, jump again.
func BenchmarkTreeOverview200Forks(b *testing.B) {
	a := New(nil, Options{})
	a.Update(tea.WindowSizeMsg{Width: 200, Height: 50})
	a.openTree(treeLoadedMsg{data: forkTree(200)})
	keys := []tea.KeyPressMsg{press("1"), press(">"), press("0"), press(">")}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.Update(keys[i%len(keys)])
		_ = a.View()
	}
}

// BenchmarkFindKeys is the key handling of find on a 10,000-message run:
// / then enter on a typed query, and n. The search runs in a command, off
// the UI goroutine (BenchmarkFindSearch is what it costs there); these
// measure Update alone, which no longer reads the tree's messages.
func BenchmarkFindKeys(b *testing.B) {
	const q = "tests pass" // every fourth message of longTree
	open := func() *App {
		a := New(nil, Options{})
		a.Update(tea.WindowSizeMsg{Width: 200, Height: 50})
		a.openTree(treeLoadedMsg{data: longTree(10_000)})
		return a
	}
	b.Run("slash-enter", func(b *testing.B) {
		a := open()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			a.Update(press("/"))
			a.tree.finder.input.SetValue(q) // typed
			a.Update(press("enter"))
		}
		if a.tree.finder.pending != q {
			b.Fatal("no search was asked for")
		}
	})
	b.Run("n", func(b *testing.B) {
		a := open()
		a.Update(press("/"))
		a.tree.finder.input.SetValue(q)
		a.Update(press("enter"))
		matches, at, order, _ := findIn(context.Background(), a.tree.data, q)
		a.Update(findDoneMsg{gen: a.tree.gen, query: q, matches: matches, at: at, order: order})
		if len(a.tree.finder.matches) != 2500 {
			b.Fatal(len(a.tree.finder.matches))
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			a.Update(press("n"))
		}
	})
}

// BenchmarkFindSearch is the search itself on a 10,000-message run, as
// the command runs it.
func BenchmarkFindSearch(b *testing.B) {
	data := longTree(10_000)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		findIn(context.Background(), data, "tests pass")
	}
}
