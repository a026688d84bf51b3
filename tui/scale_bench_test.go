package tui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"tine/store"
)

// scaleSizes are the runs the scale benchmarks compare: a 2,000-message
// session and a 200,000-message one, built the same way (issue 19).
var scaleSizes = []int{2_000, 200_000}

// scaleStore is one store holding a run of each of scaleSizes, made once
// for the benchmarks that ask (storing 200,000 messages takes a while).
var scaleStore struct {
	once  sync.Once
	dir   string
	st    *store.Store
	trees map[int]string
	err   error
}

func scaled(b *testing.B) (*store.Store, map[int]string) {
	b.Helper()
	s := &scaleStore
	s.once.Do(func() {
		if s.dir, s.err = os.MkdirTemp("", "tine-scale-*"); s.err != nil {
			return
		}
		if s.st, s.err = store.Open(filepath.Join(s.dir, "tine.db")); s.err != nil {
			return
		}
		s.trees = map[int]string{}
		for _, n := range scaleSizes {
			r := longTree(n).runs[0]
			run := r.run()
			run.ID, run.TreeID, run.CreatedAt = "", "", t0.Add(-time.Duration(n)*time.Second)
			if s.err = s.st.CreateRun(context.Background(), &run, r.ownMsgs()); s.err != nil {
				return
			}
			s.trees[n] = run.ID
		}
	})
	if s.err != nil {
		b.Fatal(s.err)
	}
	return s.st, s.trees
}

// closeScaleStore removes the benchmarks' store (TestMain).
func closeScaleStore() {
	if s := &scaleStore; s.st != nil {
		s.st.Close()
		os.RemoveAll(s.dir)
	}
}

// settle runs cmd and what its answers start, as the program would, but
// only the reads of the tree (its structure, pages, where to cut): the
// markdown renders and timers are left out.
func settle(a *App, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	switch msg := cmd().(type) {
	case tea.BatchMsg:
		for _, c := range msg {
			settle(a, c)
		}
	case treeLoadedMsg, bodiesLoadedMsg, forkBoundsMsg:
		_, next := a.Update(msg)
		settle(a, next)
	}
}

// openScaled is the App at 200x50 with the n-message tree open, as enter
// on the library opens it.
func openScaled(b *testing.B, n int) *App {
	st, trees := scaled(b)
	a := New(st, Options{})
	a.Update(tea.WindowSizeMsg{Width: 200, Height: 50})
	settle(a, a.loadTree(trees[n], "", 0))
	if a.tree == nil || len(a.tree.rows) != n {
		b.Fatal("the tree did not open")
	}
	return a
}

// heldMB is how much more the heap holds after fn than before, with fn's
// result kept.
func heldMB(fn func() any) float64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	keep := fn()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
}

// BenchmarkOpenTreeScale is enter on the library to the tree shown, as
// the command that opens it runs (its structure, where it can be cut, the
// first screen's messages) and the screen it lays out, for a 2,000- and a
// 200,000-message run; MB-held is what the open tree keeps. The target:
// the big one within 3x of the small one, and at most 40 MB.
func BenchmarkOpenTreeScale(b *testing.B) {
	st, trees := scaled(b)
	ctx := context.Background()
	for _, n := range scaleSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			open := func() any {
				data, err := LoadTree(ctx, st, trees[n], nil)
				if err != nil {
					b.Fatal(err)
				}
				ts := newTreeScreen(data)
				if err := data.preload(ctx, ts.rows, "", 0, 50); err != nil {
					b.Fatal(err)
				}
				if len(ts.rows) != n {
					b.Fatal(len(ts.rows))
				}
				return &ts
			}
			held := heldMB(open)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				open()
			}
			b.ReportMetric(held, "MB-held")
		})
	}
}

// BenchmarkTreeFrameScale renders a whole 200x50 tree screen frame while
// the cursor moves down, on a 2,000- and a 200,000-message run read from
// the store: the target is about 1 ms (the pages read as it goes are not
// timed: they are read off the UI goroutine).
func BenchmarkTreeFrameScale(b *testing.B) {
	for _, n := range scaleSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			a := openScaled(b, n)
			down, up := press("j"), press("k")
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				key := down
				if i/500%2 == 1 {
					key = up
				}
				_, cmd := a.Update(key)
				_ = a.View()
				b.StopTimer()
				settle(a, cmd)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkTreeMoveScale is G, pgup and g on a 2,000- and a
// 200,000-message run read from the store, each until the screen it
// moves to is drawn with its messages read: the target is under 20 ms.
func BenchmarkTreeMoveScale(b *testing.B) {
	keys := []tea.KeyPressMsg{press("G"), {Code: tea.KeyPgUp}, press("g")}
	for _, n := range scaleSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			a := openScaled(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				_, cmd := a.Update(keys[i%len(keys)])
				settle(a, cmd)
				_ = a.View()
			}
			b.StopTimer()
			if r, _ := a.tree.selected(); !a.tree.data.runs[r.run].loaded(int(r.msg)) {
				b.Fatal("the message under the cursor was not read")
			}
		})
	}
}
