package markdown

import (
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// typicalMessage is an assistant's answer of about 2 kB: headings, a list,
// a table, a code block, inline marks and links.
const typicalMessage = "## What was wrong\n\n" +
	"`TestParseDates` failed **now and then** because `ParseDate` called `time.Now()` twice: once for\n" +
	"the date and once for the zone. When a test ran across midnight the two disagreed. See\n" +
	"[the time package](https://pkg.go.dev/time#Now) and https://github.com/golang/go/issues/12345.\n\n" +
	"## What I changed\n\n" +
	"1. Added a `Clock` interface to `parser.go`, with `realClock` as the default.\n" +
	"2. `ParseDate` and `ParseRange` take the clock from the parser:\n" +
	"   - `today` and `yesterday` use `clock.Now()`\n" +
	"   - the new `tomorrow` case does too\n" +
	"3. The tests use a *fixed* clock, so they no longer depend on when they run.\n\n" +
	"| File | Change | Lines |\n|:-----|:-------|------:|\n" +
	"| parser.go | inject a clock; add `tomorrow` | +14 −3 |\n" +
	"| parser_test.go | fixed clock in every test; a case for each keyword | +41 −9 |\n" +
	"| go.mod | nothing | 0 |\n\n" +
	"```go\nfunc (p *Parser) ParseDate(s string) (time.Time, error) {\n\tswitch s {\n\tcase \"today\":\n" +
	"\t\treturn p.clock.Now(), nil\n\tcase \"yesterday\":\n\t\treturn p.clock.Now().AddDate(0, 0, -1), nil\n" +
	"\tcase \"tomorrow\":\n\t\treturn p.clock.Now().AddDate(0, 0, 1), nil\n\t}\n\treturn time.Parse(time.DateOnly, s)\n}\n```\n\n" +
	"> **Note:** `go test -count=100 ./parser/` passed 100 times out of 100 with the change, and\n" +
	"> failed 3 times out of 100 without it.\n\n" +
	"- [x] reproduce the failure\n- [x] fix it\n- [ ] ask whether `ParseRange` should accept `tomorrow..next week`\n\n" +
	"Let me know if you want the clock exported; I kept it ~private~ unexported for now.\n"

// benchInputs are the inputs every benchmark of Render runs on.
func benchInputs() []struct {
	name string
	src  string
} {
	big := strings.Repeat(typicalMessage+"\n", 64<<10/len(typicalMessage))
	return []struct {
		name string
		src  string
	}{
		{"typical2kB", typicalMessage},
		{"message64kB", big},
		{"stars10k", strings.Repeat("*", 10_000)},
		{"brackets10k", strings.Repeat("[", 10_000)},
		{"backticks10k", strings.Repeat("`", 10_000)},
		{"starA5k", strings.Repeat("*a ", 5_000)},
		{"ticksMixed", func() string {
			var b strings.Builder
			for i := 1; i < 140; i++ { // runs of every length, none closed
				b.WriteString(strings.Repeat("`", i) + " x ")
			}
			return b.String()
		}()},
		{"linkOpeners5k", strings.Repeat("[a](", 5_000)},
		{"parenDest5k", "[a](" + strings.Repeat("(", 5_000)},
		{"closeBrackets5k", strings.Repeat("[x]](", 5_000)},
		{"quotes10k", strings.Repeat(">", 10_000) + " x"},
		{"nestedLists", func() string { // 64 deep, again and again
			var b strings.Builder
			for i := range 2000 {
				b.WriteString(strings.Repeat(" ", 2*(i%64)) + "- x\n")
			}
			return b.String()
		}()},
		{"tableWide", "|" + strings.Repeat(" a |", 2000) + "\n|" + strings.Repeat("---|", 2000) + "\n" + strings.Repeat("| b\n", 2000)},
	}
}

func BenchmarkRender(b *testing.B) {
	th := testTheme()
	for _, in := range benchInputs() {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.src)))
			b.ReportAllocs()
			for b.Loop() {
				Render(in.src, 100, th)
			}
		})
	}
}

// TestPathologicalIsLinear: growing a pathological input 16 times grows
// the work about 16 times, not 256, so no input can make the pane stall.
// Work is this process's CPU time, not wall time, so other processes on a
// busy machine do not count; the test is not parallel, so nothing else in
// the process runs while it measures. Fresh memory and the collector make
// a big input cost up to ~3x more per byte here, hence the margin.
func TestPathologicalIsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("measures rendering")
	}
	th := testTheme()
	grow := map[string]func(n int) string{
		"stars":    func(n int) string { return strings.Repeat("*a ", n) },
		"brackets": func(n int) string { return strings.Repeat("[", n) },
		"ticks": func(n int) string {
			var b strings.Builder
			for i := 1; b.Len() < n; i++ {
				b.WriteString(strings.Repeat("`", i%300+1) + "x")
			}
			return b.String()
		},
		"links":  func(n int) string { return strings.Repeat("[a](", n) },
		"parens": func(n int) string { return "[a](" + strings.Repeat("(", n) },
		"under":  func(n int) string { return strings.Repeat("_a_ _b", n) },
		"quotes": func(n int) string { return strings.Repeat(">", n) },
	}
	best := func(src string) time.Duration {
		d := time.Duration(1 << 62)
		for range 3 {
			runtime.GC()
			start := cpuTime(t)
			Render(src, 80, th)
			d = min(d, cpuTime(t)-start)
		}
		return d
	}
	for name, g := range grow {
		small, large := best(g(8_000)), best(g(128_000))
		if large > 100*small+5*time.Millisecond {
			t.Errorf("%s: %v of CPU for 8k, %v for 128k: not linear", name, small, large)
		}
	}
}

// cpuTime is the CPU time this process has used.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
