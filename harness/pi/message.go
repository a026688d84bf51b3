package pi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"tine/model"
)

// convert turns an entry into a message, when it is one: a message entry,
// a compaction, a branch summary or a custom_message (the last three are
// what pi puts into the model's context in their place). It also returns
// the message's cost in USD, as pi priced it.
func convert(e *entry, line []byte) (model.Message, float64, bool) {
	switch e.Type {
	case "message":
		if e.Message == nil {
			return model.Message{}, 0, false
		}
		return convertMessage(e.Message, line)
	case "compaction":
		return system(fmt.Sprintf("conversation compacted (%d tokens before); summary:\n\n%s",
			int64(e.TokensBefore), e.Summary)), 0, true
	case "branch_summary":
		if e.Summary == "" {
			return model.Message{}, 0, false // pi leaves it out of the context too
		}
		return system("summary of the branch left behind:\n\n" + e.Summary), 0, true
	case "custom_message":
		// Injected by an extension; pi sends it to the model as a user message.
		return model.Message{Role: model.User, Parts: parts(e.Content, line)}, 0, true
	}
	return model.Message{}, 0, false
}

func system(text string) model.Message {
	return model.Message{Role: model.System, Parts: []model.Part{{Kind: model.Text, Text: text}}}
}

func convertMessage(m *message, line []byte) (model.Message, float64, bool) {
	switch m.Role {
	case "user", "custom", "hookMessage":
		// custom (hookMessage before version 3) is an extension's message,
		// which pi sends to the model as a user message.
		return model.Message{Role: model.User, Parts: parts(m.Content, line)}, 0, true
	case "assistant":
		out := model.Message{Role: model.Assistant, Parts: parts(m.Content, line), Model: modelName(m.Provider, m.Model)}
		var cost float64
		if u := m.Usage; u != nil {
			// A corrupt count drops the usage (the parser says so).
			out.Usage, _ = usageOf(u)
			if u.Cost != nil && !math.IsInf(u.Cost.Total, 0) {
				cost = u.Cost.Total
			}
		}
		if m.ErrorMessage != "" || m.StopReason == "error" || m.StopReason == "aborted" {
			raw, _ := json.Marshal(struct {
				StopReason   string `json:"stopReason"`
				ErrorMessage string `json:"errorMessage,omitempty"`
			}{m.StopReason, m.ErrorMessage})
			out.Parts = append(out.Parts, model.Part{Kind: model.Other, Raw: string(raw)})
		}
		return out, cost, true
	case "toolResult":
		res := model.Part{Kind: model.ToolResult, ToolCallID: m.ToolCallID, ToolName: m.ToolName, IsError: m.IsError}
		var text []string
		var rest []model.Part
		for _, p := range parts(m.Content, line) {
			if p.Kind == model.Text {
				text = append(text, p.Text)
			} else {
				rest = append(rest, p) // images (read on a picture) follow the result
			}
		}
		res.Text = strings.Join(text, "\n")
		return model.Message{Role: model.Tool, Parts: append([]model.Part{res}, rest...)}, 0, true
	case "bashExecution":
		// A command the person ran with !cmd; pi shows the model this text.
		return model.Message{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: bashText(m)}}}, 0, true
	case "branchSummary":
		return system("summary of the branch left behind:\n\n" + m.Summary), 0, true
	case "compactionSummary":
		return system(fmt.Sprintf("conversation compacted (%d tokens before); summary:\n\n%s", int64(m.TokensBefore), m.Summary)), 0, true
	}
	return model.Message{}, 0, false
}

// usageOf converts pi's usage. A count that is not a number in 0..2^53
// (model.CheckTokens) makes the whole usage suspect: it is dropped, and the
// error says which count.
func usageOf(u *usage) (model.Usage, error) {
	in, err1 := model.CheckTokens(u.Input)
	out, err2 := model.CheckTokens(u.Output)
	read, err3 := model.CheckTokens(u.CacheRead)
	write, err4 := model.CheckTokens(u.CacheWrite)
	for i, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return model.Usage{}, fmt.Errorf("usage.%s: %w", [...]string{"input", "output", "cacheRead", "cacheWrite"}[i], err)
		}
	}
	if u.Cost != nil && math.IsInf(u.Cost.Total, 0) {
		return model.Usage{}, errors.New("usage.cost.total: a number beyond float64")
	}
	return model.Usage{InputTokens: in, OutputTokens: out, CacheReadTokens: read, CacheWriteTokens: write}, nil
}

// bashText is pi's bashExecutionToText.
func bashText(m *message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Ran `%s`\n", m.Command)
	if m.Output != "" {
		fmt.Fprintf(&b, "```\n%s\n```", m.Output)
	} else {
		b.WriteString("(no output)")
	}
	switch {
	case m.Cancelled:
		b.WriteString("\n\n(command cancelled)")
	case m.ExitCode != nil && *m.ExitCode != 0:
		fmt.Fprintf(&b, "\n\nCommand exited with code %d", *m.ExitCode)
	}
	if m.Truncated && m.FullOutputPath != "" {
		fmt.Fprintf(&b, "\n\n[Output truncated. Full output: %s]", m.FullOutputPath)
	}
	return b.String()
}

// parts converts content blocks in order.
func parts(blocks []block, line []byte) []model.Part {
	if len(blocks) == 0 {
		return nil
	}
	out := make([]model.Part, 0, len(blocks))
	var raws []json.RawMessage
	rawsRead := false
	for i, b := range blocks {
		switch b.Type {
		case "text":
			out = append(out, model.Part{Kind: model.Text, Text: b.Text})
		case "thinking":
			text := b.Thinking
			if text == "" && b.Redacted {
				text = "(redacted)"
			}
			out = append(out, model.Part{Kind: model.Thinking, Text: text})
		case "toolCall":
			out = append(out, model.Part{Kind: model.ToolCall, ToolCallID: b.ID, ToolName: b.Name, ToolInput: toolInput(b.Arguments)})
		case "image":
			out = append(out, model.Part{Kind: model.Image, Raw: imagePlaceholder(b)})
		default:
			if !rawsRead {
				raws, rawsRead = rawBlocks(line), true
			}
			var raw []byte
			if i < len(raws) {
				raw = raws[i]
			} else {
				raw, _ = json.Marshal(struct {
					Type string `json:"type"`
				}{b.Type})
			}
			out = append(out, model.Part{Kind: model.Other, Raw: string(raw)})
		}
	}
	return out
}

// toolInput is a call's arguments as JSON text. pi stores an object; a
// model that sent a JSON string gets the string's contents.
func toolInput(args json.RawMessage) string {
	if len(args) == 0 || string(args) == "null" {
		return "{}"
	}
	if args[0] == '"' {
		var s string
		if json.Unmarshal(args, &s) == nil {
			return s
		}
	}
	return string(args)
}

// imagePlaceholder stands in for an image: its type and size, never its
// base64, which would bloat the store and the search index.
func imagePlaceholder(b block) string {
	n := 0
	if len(b.Data) >= 2 && b.Data[0] == '"' {
		s := b.Data[1 : len(b.Data)-1]
		n = len(s) / 4 * 3
		for k := len(s) - 1; k >= 0 && k >= len(s)-2 && s[k] == '='; k-- {
			n--
		}
	}
	raw, _ := json.Marshal(struct {
		Type     string `json:"type"`
		MimeType string `json:"mimeType,omitempty"`
		Bytes    int    `json:"bytes"`
	}{"image", b.MimeType, max(n, 0)})
	return string(raw)
}
