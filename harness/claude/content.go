package claude

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"tine/model"
)

// maxRaw caps the raw JSON kept for a block tine does not know; bigger
// blocks (documents, say) keep only their type and size.
const maxRaw = 64 << 10

// message reads a user or assistant record's message object.
func (d *record) message(typ string, raw []byte, compactSummary bool) (pay, kind, error) {
	if isNull(raw) {
		return pay{}, 0, errors.New("no message")
	}
	var content, usage, id, mdl []byte
	o := members(raw)
	for k, v := range o.Members() {
		switch string(k) {
		case "content":
			content = v
		case "usage":
			usage = v
		case "id":
			id = v
		case "model":
			mdl = v
		}
	}
	if o.Err() != nil {
		return pay{}, 0, errors.New("malformed message")
	}
	var pl pay
	k := kMessage
	if typ == "assistant" {
		pl.msg.Role = model.Assistant
		pl.msgID = strOr(id)
		pl.msg.Model = strOr(mdl)
		u, err := checkedUsage(usage)
		if err != nil {
			// A corrupt count is never stored: the message stays,
			// without its usage, and the line says why.
			d.skips = append(d.skips, "assistant record usage dropped: "+err.Error())
		}
		pl.msg.Usage = u
	} else {
		pl.msg.Role = model.User
		if compactSummary {
			k = kSummary
		}
	}
	if s, ok := str(content); ok {
		if typ == "user" && k == kMessage {
			var echo bool
			s, echo = localCommand(s)
			if echo {
				k = kLocalEcho
			}
		}
		if s != "" {
			pl.msg.Parts = []model.Part{{Kind: model.Text, Text: s}}
		}
		return pl, k, nil
	}
	if isNull(content) {
		return pl, k, nil
	}
	parts, results, others, err := d.blocks(content, typ == "assistant")
	if err != nil {
		return pay{}, 0, err
	}
	pl.msg.Parts = parts
	if typ == "user" && results > 0 {
		// Tool results come back as user records. Ones that hold nothing
		// but results are tool messages, as every tine backend has them;
		// one that also carries text stays a user message (IsPrompt is
		// false for it anyway).
		pl.carrier = others == 0
		if pl.carrier {
			pl.msg.Role = model.Tool
		}
	}
	return pl, k, nil
}

// readUsage reads an Anthropic usage object; one holding a count that is
// not a token count (see checkedUsage) counts nothing.
func readUsage(raw []byte) model.Usage {
	u, _ := checkedUsage(raw)
	return u
}

// checkedUsage reads an Anthropic usage object. A count that is not a
// number in 0..2^53 (model.ParseTokens) makes the whole object suspect:
// it is dropped, and the error says which count.
func checkedUsage(raw []byte) (model.Usage, error) {
	var u model.Usage
	o := members(raw)
	for k, v := range o.Members() {
		var field *int64
		switch string(k) {
		case "input_tokens":
			field = &u.InputTokens
		case "output_tokens":
			field = &u.OutputTokens
		case "cache_read_input_tokens":
			field = &u.CacheReadTokens
		case "cache_creation_input_tokens":
			field = &u.CacheWriteTokens
		default:
			continue
		}
		if isNull(v) {
			continue
		}
		n, err := model.ParseTokens(string(v))
		if err != nil {
			return model.Usage{}, fmt.Errorf("%s: %w", k, err)
		}
		*field = n
	}
	return u, nil
}

// block holds the raw fields of a content block that tine reads.
type block struct {
	raw                              []byte
	typ, text, thinking, id, name    []byte
	input, toolUseID, content, isErr []byte
	source, data                     []byte
}

func readBlock(raw []byte) (block, bool) {
	b := block{raw: raw}
	o := members(raw)
	for k, v := range o.Members() {
		switch string(k) {
		case "type":
			b.typ = v
		case "text":
			b.text = v
		case "thinking":
			b.thinking = v
		case "id":
			b.id = v
		case "name":
			b.name = v
		case "input":
			b.input = v
		case "tool_use_id":
			b.toolUseID = v
		case "content":
			b.content = v
		case "is_error":
			b.isErr = v
		case "source":
			b.source = v
		case "data":
			b.data = v
		}
	}
	return b, o.Err() == nil
}

// blocks converts a content array in order. It counts the tool results
// and the other blocks, which tell a tool-result carrier from a prompt.
func (d *record) blocks(raw []byte, assistant bool) (parts []model.Part, results, others int, err error) {
	a := elements(raw)
	for v := range a.Elements() {
		b, ok := readBlock(v)
		if !ok {
			return nil, 0, 0, errors.New("malformed content block")
		}
		switch typ := strOr(b.typ); typ {
		case "text":
			parts = append(parts, model.Part{Kind: model.Text, Text: strOr(b.text)})
			others++
		case "thinking":
			parts = append(parts, model.Part{Kind: model.Thinking, Text: strOr(b.thinking)})
		case "redacted_thinking":
			parts = append(parts, model.Part{Kind: model.Thinking, Text: "(redacted)"})
		case "tool_use":
			// Only client tools pair with tool_result records. Server
			// tools (server_tool_use, mcp_tool_use) are answered inside the
			// same message and stay Other parts, so they never look unanswered.
			id := strOr(b.id)
			name := strOr(b.name)
			if id != "" {
				d.calls = append(d.calls, call{id, name})
			}
			if (name == "Task" || name == "Agent") && id != "" && assistant {
				d.tasks = append(d.tasks, taskCall{id: id, prompt: strOr(member(b.input, "prompt"))})
			}
			parts = append(parts, model.Part{Kind: model.ToolCall, ToolCallID: id, ToolName: name, ToolInput: toolInput(b.input)})
		case "tool_result":
			results++
			res := model.Part{Kind: model.ToolResult, ToolCallID: strOr(b.toolUseID), IsError: isTrue(b.isErr)}
			text, extra := resultContent(b.content)
			res.Text = text
			parts = append(parts, res)
			parts = append(parts, extra...)
		case "image":
			parts = append(parts, model.Part{Kind: model.Image, Raw: imagePlaceholder(b.source)})
			others++
		default:
			parts = append(parts, otherPart(typ, b.raw))
			if !assistant {
				others++
			}
		}
	}
	if a.Err() != nil {
		return nil, 0, 0, errors.New("malformed content")
	}
	return parts, results, others, nil
}

// member is the raw value of key in the JSON object obj, nil when absent.
func member(obj []byte, key string) []byte {
	o := members(obj)
	for k, v := range o.Members() {
		if string(k) == key {
			return v
		}
	}
	return nil
}

// resultContent reads a tool_result's content: a string, or blocks whose
// text is joined; images and other blocks become parts of their own after
// the result.
func resultContent(raw []byte) (string, []model.Part) {
	if s, ok := str(raw); ok {
		return s, nil
	}
	if isNull(raw) {
		return "", nil
	}
	var texts []string
	var extra []model.Part
	a := elements(raw)
	for v := range a.Elements() {
		b, ok := readBlock(v)
		if !ok {
			continue
		}
		switch typ := strOr(b.typ); typ {
		case "text":
			texts = append(texts, strOr(b.text))
		case "image":
			extra = append(extra, model.Part{Kind: model.Image, Raw: imagePlaceholder(b.source)})
		default:
			extra = append(extra, otherPart(typ, b.raw))
		}
	}
	return strings.Join(texts, "\n"), extra
}

// toolInput is a call's input as JSON text.
func toolInput(raw []byte) string {
	if isNull(raw) {
		return "{}"
	}
	return validString(raw)
}

// otherPart keeps a block tine does not know as raw JSON, or only its type
// and size when it is big.
func otherPart(typ string, raw []byte) model.Part {
	if len(raw) <= maxRaw {
		return model.Part{Kind: model.Other, Raw: validString(raw)}
	}
	b, _ := json.Marshal(struct {
		Type  string `json:"type"`
		Bytes int    `json:"bytes"`
	}{typ, len(raw)})
	return model.Part{Kind: model.Other, Raw: string(b)}
}

// imagePlaceholder stands in for an image: its media type and size, never
// its base64, which would bloat the store and the search index.
func imagePlaceholder(source []byte) string {
	var kind, mediaType, url string
	n := 0
	o := members(source)
	for k, v := range o.Members() {
		switch string(k) {
		case "type":
			kind = strOr(v)
		case "media_type":
			mediaType = strOr(v)
		case "url":
			url = strOr(v)
		case "data":
			n = base64Len(v)
		}
	}
	b, _ := json.Marshal(struct {
		Type      string `json:"type"`
		Source    string `json:"source,omitempty"`
		MediaType string `json:"media_type,omitempty"`
		Bytes     int    `json:"bytes,omitempty"`
		URL       string `json:"url,omitempty"`
	}{"image", kind, mediaType, n, url})
	return string(b)
}

// base64Len is the decoded size of a base64 JSON string.
func base64Len(raw []byte) int {
	if len(raw) < 2 || raw[0] != '"' {
		return 0
	}
	s := raw[1 : len(raw)-1]
	n := len(s) / 4 * 3
	for k := len(s) - 1; k >= 0 && k >= len(s)-2 && s[k] == '='; k-- {
		n--
	}
	return max(n, 0)
}

// localCommand reads the user records a slash command leaves. The command
// itself ("<command-name>/compact</command-name>...") is what the person
// typed and becomes "/compact args"; its output
// ("<local-command-stdout>...") was shown to them, not typed, and becomes
// a system message (echo).
func localCommand(s string) (string, bool) {
	t := strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(t, "<command-name>") || strings.HasPrefix(t, "<command-message>") && strings.Contains(t, "<command-name>"):
		name := between(t, "<command-name>", "</command-name>")
		args := strings.TrimSpace(between(t, "<command-args>", "</command-args>"))
		if args != "" {
			name += " " + args
		}
		return name, false
	case strings.HasPrefix(t, "<local-command-stdout>"):
		return strings.TrimSpace(between(t, "<local-command-stdout>", "</local-command-stdout>")), true
	case strings.HasPrefix(t, "<local-command-stderr>"):
		return strings.TrimSpace(between(t, "<local-command-stderr>", "</local-command-stderr>")), true
	}
	return s, false
}

// between returns the text between open and close, "" when open is missing.
func between(s, open, close string) string {
	i := strings.Index(s, open)
	if i < 0 {
		return ""
	}
	s = s[i+len(open):]
	if j := strings.Index(s, close); j >= 0 {
		s = s[:j]
	}
	return s
}
