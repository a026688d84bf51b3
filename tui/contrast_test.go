package tui

import (
	"image/color"
	"math"
	"testing"

	"charm.land/lipgloss/v2"
	"github.com/stretchr/testify/assert"
)

// contrast is the WCAG contrast ratio of two colours (1 to 21).
func contrast(a, b color.Color) float64 {
	lum := func(c color.Color) float64 {
		r, g, b, _ := c.RGBA()
		ch := func(v uint32) float64 {
			s := float64(v) / 0xffff
			if s <= 0.03928 {
				return s / 12.92
			}
			return math.Pow((s+0.055)/1.055, 2.4)
		}
		return 0.2126*ch(r) + 0.7152*ch(g) + 0.0722*ch(b)
	}
	la, lb := lum(a), lum(b)
	return (math.Max(la, lb) + 0.05) / (math.Min(la, lb) + 0.05)
}

// TestTextReadsOnBothBackgrounds: every style that colours text keeps a
// contrast of at least 4.5:1 (WCAG AA) with the background it was built
// for, and none of them is faint on a light one, where faint text fades
// into the white.
func TestTextReadsOnBothBackgrounds(t *testing.T) {
	for _, dark := range []bool{false, true} {
		st := NewStyles(dark)
		bg := color.Color(color.White)
		if dark {
			bg = color.Black
		}
		styles := map[string]lipgloss.Style{"Title": st.Title, "Subtle": st.Subtle, "Dim": st.Dim, "Header": st.Header,
			"Error": st.Error, "Warn": st.Warn, "Info": st.Info, "OK": st.OK, "Status": st.Status, "ToolName": st.ToolName,
			"Tokens": st.Tokens, "Checkpoint": st.Checkpoint, "Unsafe": st.Unsafe, "Fork": st.Fork, "ForkName": st.ForkName,
			"Thinking": st.Thinking, "Key": st.Key, "KeyDesc": st.KeyDesc, "DiffAdd": st.DiffAdd, "DiffDel": st.DiffDel,
			"DiffHunk": st.DiffHunk, "md.HeadingMark": st.Markdown.HeadingMark, "md.URL": st.Markdown.URL,
			"md.Code": st.Markdown.Code, "md.Quote": st.Markdown.Quote, "md.CodeLabel": st.Markdown.CodeLabel}
		for role, s := range st.Roles {
			styles["role "+string(role)] = s
		}
		for status, s := range st.RunStatus {
			styles["status "+string(status)] = s
		}
		for name, s := range styles {
			fg := s.GetForeground()
			if _, none := fg.(lipgloss.NoColor); none {
				continue
			}
			assert.GreaterOrEqual(t, contrast(fg, bg), 4.5, "%s on a dark=%v background", name, dark)
			if !dark {
				assert.False(t, s.GetFaint(), "%s is faint on a light background", name)
			}
		}
	}
}

// TestColorFGBGPicksThePalette: before (or without) the terminal's answer
// about its background, COLORFGBG says it: "0;15" is dark text on a light
// background.
func TestColorFGBGPicksThePalette(t *testing.T) {
	for v, dark := range map[string]bool{"0;15": false, "15;0": true, "0;default;15": false, "7;8": true, "0;7": false, "": true, "junk": true} {
		assert.Equal(t, dark, backgroundIsDark(v), "COLORFGBG=%q", v)
	}
	t.Setenv("COLORFGBG", "0;15")
	assert.False(t, New(nil, Options{}).styles.IsDark, "the light palette from the start")
	t.Setenv("COLORFGBG", "15;0")
	assert.True(t, New(nil, Options{}).styles.IsDark)
}
