package tui

import (
	"image/color"
	"strconv"
	"strings"

	"charm.land/lipgloss/v2"

	"tine/model"
	"tine/tui/markdown"
)

// Styles holds every style the screens use, built for one background. It is
// rebuilt when the terminal reports its background colour.
type Styles struct {
	IsDark bool

	Title, Subtle, Dim, Bold lipgloss.Style
	Selected, CursorMark     lipgloss.Style
	Header, HeaderActive     lipgloss.Style
	Error, Warn, Info, OK    lipgloss.Style
	Status                   lipgloss.Style
	Roles                    map[model.Role]lipgloss.Style
	ToolName, Tokens         lipgloss.Style
	Checkpoint, Unsafe       lipgloss.Style
	Fork, ForkName           lipgloss.Style
	RunStatus                map[model.Status]lipgloss.Style
	PaneBorder, PaneFocused  lipgloss.Style
	Dialog                   lipgloss.Style
	Match                    lipgloss.Style
	Thinking, ToolOutput     lipgloss.Style
	Key, KeyDesc             lipgloss.Style
	DiffAdd, DiffDel         lipgloss.Style
	DiffHunk, DiffFile       lipgloss.Style
	Markdown                 markdown.Theme
}

// NewStyles builds the styles for a dark or light background. Colours are
// never the only signal: marks and glyphs carry meaning under NO_COLOR too.
func NewStyles(isDark bool) Styles {
	ld := lipgloss.LightDark(isDark)
	c := func(light, dark string) color.Color { return ld(lipgloss.Color(light), lipgloss.Color(dark)) }
	fg := c("#1f2328", "#e6edf3")
	subtle := c("#57606a", "#8b949e")
	// Dim is the faintest text, still 4.5:1 on its background; faint only
	// on a dark one (on a light one it fades into the white).
	dim := c("#6e7781", "#6e7681")
	faint := isDark
	accent := c("#0969da", "#58a6ff")
	green := c("#1a7f37", "#3fb950")
	red := c("#cf222e", "#f85149")
	yellow := c("#9a6700", "#d29922")
	purple := c("#8250df", "#bc8cff")
	cyan := c("#1b7c83", "#39c5cf")
	selBg := c("#ddf4ff", "#1f3a5f")
	base := lipgloss.NewStyle()

	s := Styles{
		IsDark:       isDark,
		Title:        base.Bold(true).Foreground(accent),
		Subtle:       base.Foreground(subtle),
		Dim:          base.Foreground(dim).Faint(faint),
		Bold:         base.Bold(true),
		Selected:     base.Background(selBg).Foreground(fg),
		CursorMark:   base.Foreground(accent).Bold(true),
		Header:       base.Foreground(subtle).Bold(true),
		HeaderActive: base.Foreground(accent).Bold(true).Underline(true),
		Error:        base.Foreground(red).Bold(true),
		Warn:         base.Foreground(yellow).Bold(true),
		Info:         base.Foreground(accent),
		OK:           base.Foreground(green),
		Status:       base.Foreground(subtle),
		Roles: map[model.Role]lipgloss.Style{
			model.User:      base.Foreground(accent).Bold(true),
			model.Assistant: base.Foreground(green).Bold(true),
			model.Tool:      base.Foreground(yellow),
			model.System:    base.Foreground(purple),
		},
		ToolName:   base.Foreground(cyan),
		Tokens:     base.Foreground(subtle),
		Checkpoint: base.Foreground(green),
		Unsafe:     base.Foreground(dim).Faint(faint),
		Fork:       base.Foreground(purple),
		ForkName:   base.Foreground(purple).Bold(true),
		RunStatus: map[model.Status]lipgloss.Style{
			model.Pending:   base.Foreground(subtle),
			model.Queued:    base.Foreground(subtle),
			model.Running:   base.Foreground(accent),
			model.Completed: base.Foreground(green),
			model.Failed:    base.Foreground(red),
			model.Cancelled: base.Foreground(yellow),
		},
		PaneBorder:  base.Foreground(dim),
		PaneFocused: base.Foreground(accent).Bold(true),
		Dialog:      base.Border(lipgloss.RoundedBorder()).BorderForeground(accent).Padding(0, 1),
		Match:       base.Bold(true).Underline(true),
		Thinking:    base.Foreground(subtle).Italic(true),
		ToolOutput:  base.Foreground(fg),
		Key:         base.Foreground(accent).Bold(true),
		KeyDesc:     base.Foreground(subtle),
		DiffAdd:     base.Foreground(green),
		DiffDel:     base.Foreground(red),
		DiffHunk:    base.Foreground(cyan),
		DiffFile:    base.Bold(true),
	}
	code := c("#953800", "#ffa657")
	s.Markdown = markdown.Theme{
		Heading:     base.Foreground(accent).Bold(true),
		HeadingMark: base.Foreground(dim).Faint(faint),
		Emph:        base.Italic(true),
		Strong:      base.Bold(true),
		Strike:      base.Strikethrough(true),
		Code:        base.Foreground(code),
		CodeBlock:   base.Foreground(code),
		CodeLabel:   base.Foreground(subtle).Italic(true),
		Link:        base.Foreground(accent).Underline(true),
		URL:         base.Foreground(dim).Faint(faint),
		Quote:       base.Foreground(subtle).Italic(true),
		QuoteBar:    base.Foreground(dim),
		Bullet:      base.Foreground(accent),
		Rule:        base.Foreground(dim),
		TableHead:   base.Bold(true),
		HTML:        base.Foreground(subtle),
	}
	return s
}

// role returns the style of a role, plain for one it does not know.
func (s Styles) role(r model.Role) lipgloss.Style {
	if st, ok := s.Roles[r]; ok {
		return st
	}
	return lipgloss.NewStyle()
}

// status returns the style of a run status.
func (s Styles) status(st model.Status) lipgloss.Style {
	if x, ok := s.RunStatus[st]; ok {
		return x
	}
	return lipgloss.NewStyle()
}

// backgroundIsDark reads COLORFGBG ("fg;bg", or "fg;default;bg"), which
// some terminals set: a background of 7 or 9-15 is light. Without it, or
// when it cannot be read, the background is taken to be dark, until the
// terminal answers tea.RequestBackgroundColor.
func backgroundIsDark(colorfgbg string) bool {
	fields := strings.Split(colorfgbg, ";")
	bg, err := strconv.Atoi(strings.TrimSpace(fields[len(fields)-1]))
	if err != nil || len(fields) < 2 {
		return true
	}
	return !(bg == 7 || (bg >= 9 && bg <= 15))
}
