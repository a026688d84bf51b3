package markdown

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// lineProblem says what is wrong with one output line, nil if nothing:
// a control character, an escape sequence other than SGR, a style left
// open at the end, or (for widths of 10 and more) a line too wide.
func lineProblem(l string, width int) error {
	if !utf8.ValidString(l) {
		return fmt.Errorf("invalid UTF-8")
	}
	open := false
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case c == 0x1b:
			j := i + 1
			if j >= len(l) || l[j] != '[' {
				return fmt.Errorf("ESC at %d does not begin an SGR sequence", i)
			}
			j++
			for j < len(l) && (l[j] >= '0' && l[j] <= '9' || l[j] == ';' || l[j] == ':') {
				j++
			}
			if j >= len(l) || l[j] != 'm' {
				return fmt.Errorf("ESC at %d does not begin an SGR sequence", i)
			}
			params := l[i+2 : j]
			open = params != "" && params != "0"
			i = j
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("control byte %#x at %d", c, i)
		case c == 0xc2 && i+1 < len(l) && l[i+1] >= 0x80 && l[i+1] <= 0x9f:
			return fmt.Errorf("C1 control at %d", i)
		}
	}
	if open {
		return fmt.Errorf("a style is left open at the end of the line")
	}
	if width >= 10 {
		if w := ansi.StringWidth(l); w > width {
			return fmt.Errorf("line is %d cells wide, more than %d", w, width)
		}
	}
	return nil
}

// FuzzRender: no input makes Render panic, emit a control character or an
// escape sequence other than its own SGR (with no theme, none at all),
// leave a style open at a line's end, overflow the width, or hang.
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"# h\n\n*a* **b** `c` [d](e) ~~f~~\n\n- x\n  - y\n\n1. [ ] z\n\n> q\n\n```go\ncode\n```\n\n| a | b |\n|:-|-:|\n| 1 | 2 |",
		"中文 😀 &#27;[31m \x1b]8;;x\x07 <https://a> www.b.c",
		strings.Repeat("*", 100) + strings.Repeat("[", 50) + strings.Repeat("`", 30),
		"    code\n---\n===\n<div>\n\n***",
	} {
		f.Add(s, 40)
	}
	f.Fuzz(func(t *testing.T, src string, width int) {
		if len(src) > 4096 {
			return
		}
		width = width%200 + 10
		if width < 10 {
			width += 200
		}
		// A hang is a failure too: the process dies with the input.
		hung := time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("Render hung: %q at width %d", src, width)) })
		out := Render(src, width, testTheme())
		hung.Stop()
		for i, l := range strings.Split(out, "\n") {
			if err := lineProblem(l, width); err != nil {
				t.Fatalf("line %d: %v: %q", i, err, l)
			}
		}
		// With no styles, any escape at all came from the input.
		if bare := Render(src, width, Theme{}); strings.IndexByte(bare, 0x1b) >= 0 {
			t.Fatalf("an escape from the input: %q", bare)
		}
	})
}
