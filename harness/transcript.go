package harness

import (
	"fmt"

	"tine/model"
)

// Transcript is one run read from a file by a backend's parser, ready to store.
type Transcript struct {
	Run      model.Run
	Messages []model.Message
	// Skipped lists what the parser could not read; the rest was kept.
	Skipped []Skip
}

// Skip is one record a parser skipped, and why.
type Skip struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

func (s Skip) String() string { return fmt.Sprintf("%s:%d: %s", s.File, s.Line, s.Reason) }

// TitleOf is a run's title when its agent gave none: its first prompt, on one line.
func TitleOf(msgs []model.Message) string {
	for _, m := range msgs {
		if m.IsPrompt() {
			return OneLine(m.PlainText(), 120)
		}
	}
	return ""
}
