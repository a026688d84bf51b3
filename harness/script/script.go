// Package script is tine's offline, deterministic harness: it answers a
// turn from the text of the conversation alone, with no network and no
// randomness, so demos and tests can fork and run turns anywhere. Asked to
// "run" or "use tools" it answers with a batch of tool calls, their results
// and a closing reply, the way an agent does.
package script

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"tine/harness"
	"tine/model"
)

// Harness is the script harness. Delay paces its events so a person can
// watch a fork run; zero answers at once.
type Harness struct {
	Delay time.Duration
	// Now stamps messages; nil means time.Now.
	Now func() time.Time
}

// Name implements harness.Harness.
func (*Harness) Name() string { return Agent.Name }

// Capabilities implements harness.Harness: it can do everything, offline.
func (*Harness) Capabilities() harness.Capabilities { return Agent.Caps }

var openings = []string{
	"Here is one way to look at it.",
	"Let me take a different angle.",
	"Short answer first, then the detail.",
	"I would start from the failing case.",
	"Two options stand out.",
}

// Turn implements harness.Harness.
func (h *Harness) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	now := h.Now
	if now == nil {
		now = time.Now
	}
	prompt := req.Input
	if prompt == "" {
		for i := len(req.Prefix) - 1; i >= 0; i-- {
			if req.Prefix[i].IsPrompt() {
				prompt = req.Prefix[i].PlainText()
				break
			}
		}
	}
	var out []model.Message
	if _, input := req.Conversation(time.Time{}); input != nil {
		out = append(out, *input)
	}
	seed := hash(prompt, len(req.Prefix))
	modelName := req.Model
	if modelName == "" {
		modelName = "script-1"
	}
	lower := strings.ToLower(prompt)
	if strings.Contains(lower, "run") || strings.Contains(lower, "tool") {
		calls := model.Message{Role: model.Assistant, Model: modelName, Usage: usage(seed, len(req.Prefix))}
		var results []model.Message
		for i, cmd := range []string{"ls", "go test ./..."}[:1+int(seed%2)] {
			id := fmt.Sprintf("call_%x_%d", seed&0xffff, i)
			input, _ := json.Marshal(map[string]string{"command": cmd})
			calls.Parts = append(calls.Parts, model.Part{Kind: model.ToolCall, ToolCallID: id, ToolName: "bash", ToolInput: string(input)})
			results = append(results, model.Message{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: id, ToolName: "bash", Text: fakeOutput(cmd, seed)}}})
		}
		out = append(out, calls)
		out = append(out, results...)
	}
	reply := fmt.Sprintf("%s You asked: %q. After %d messages of context, my answer #%d is: %s",
		openings[seed%uint64(len(openings))], model.OneLine(prompt, 80), len(req.Prefix), seed%97, verdict(seed))
	out = append(out, model.Message{Role: model.Assistant, Model: modelName,
		Parts: []model.Part{{Kind: model.Text, Text: reply}}, Usage: usage(seed+1, len(req.Prefix))})

	emit(harness.Event{Kind: harness.EventSession, NativeID: fmt.Sprintf("script-%016x", seed)})
	for _, m := range out {
		if h.Delay > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(h.Delay):
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		m.Time = now()
		emit(harness.Event{Kind: harness.EventMessage, Message: m})
	}
	return nil
}

func hash(s string, n int) uint64 {
	f := fnv.New64a()
	fmt.Fprintf(f, "%d:%s", n, s)
	return f.Sum64()
}

func usage(seed uint64, context int) model.Usage {
	return model.Usage{InputTokens: int64(200 + 40*context + int(seed%50)), OutputTokens: int64(20 + seed%180)}
}

func verdict(seed uint64) string {
	return []string{
		"keep the retry loop but bound it.",
		"rewrite the parser as a state machine.",
		"add a test that fails first, then fix.",
		"the bug is in the cache key.",
		"split the function in two.",
	}[seed%5]
}

func fakeOutput(cmd string, seed uint64) string {
	if strings.HasPrefix(cmd, "ls") {
		return "README.md\ngo.mod\nmain.go\nmodel\nstore\n"
	}
	if seed%3 == 0 {
		return "--- FAIL: TestParse (0.00s)\nFAIL\n"
	}
	return "ok  \tdemo/model\t0.012s\n"
}

// Describe implements harness.Describer: built in, offline.
func (*Harness) Describe(context.Context) harness.Description {
	return harness.Description{Installed: true, Version: "built in"}
}
