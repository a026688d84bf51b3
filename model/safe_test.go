package model

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestSafeText(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "hello\nworld", "hello\nworld"},
		{"CSI colour", "a\x1b[31mred\x1b[0m b", "ared b"},
		{"CSI cursor move and clear", "x\x1b[2J\x1b[1;1Hy", "xy"},
		{"OSC title with BEL", "\x1b]0;pwned\x07ok", "ok"},
		{"OSC 52 clipboard with ST", "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x1b\\ok", "ok"},
		{"OSC 8 hyperlink", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"DCS", "\x1bPq#0;2;0;0;0\x1b\\after", "after"},
		{"C1 CSI", "a\u009b31mb", "ab"},
		{"C1 OSC", "a\u009d0;t\u009cb", "ab"},
		{"C1 NEL dropped", "a\u0085b", "ab"},
		{"BEL visible", "ding\x07", "ding␇"},
		{"backspace visible", "abc\b\bx", "abc␈␈x"},
		{"CR alone", "50%\r100%", "50%␍100%"},
		{"CRLF", "a\r\nb", "a\nb"},
		{"tab", "a\tb", "a    b"},
		{"DEL", "a\x7fb", "a␡b"},
		{"two-byte ESC", "a\x1bcb\x1b7c", "abc"},
		{"ESC at end", "a\x1b", "a"},
		{"unterminated OSC", "a\x1b]0;title", "a"},
		{"invalid utf8", "a\xffb", "a\uFFFDb"},
		{"bidi override", "a\u202eb\u2066c", "abc"},
		{"unicode kept", "héllo 世界 🌳", "héllo 世界 🌳"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, SafeText(tt.in))
		})
	}
}

// FuzzSafeText checks that nothing SafeText returns can drive a terminal.
func FuzzSafeText(f *testing.F) {
	for _, s := range []string{"\x1b[31m", "\x1b]52;c;x\x07", "\u009b1m", "a\rb", "\xff\xfe", "\x1bP\x1b\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := SafeText(s)
		assert.True(t, utf8.ValidString(out))
		for _, r := range out {
			bad := (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f)
			assert.False(t, bad, "control %U left in %q", r, out)
		}
		assert.False(t, strings.ContainsRune(out, 0x1b))
	})
}
