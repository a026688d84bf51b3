package tui

import (
	"fmt"
	"image/color"
	"os"
	"testing"
	"time"

	"tine/model"
)

var t0 = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

func text(role model.Role, s string) model.Message {
	return model.Message{Role: role, Parts: []model.Part{{Kind: model.Text, Text: s}}, Time: t0}
}

func callMsg(ids ...string) model.Message {
	m := model.Message{Role: model.Assistant, Usage: model.Usage{InputTokens: 1200, OutputTokens: 40}, Time: t0}
	for _, id := range ids {
		m.Parts = append(m.Parts, model.Part{Kind: model.ToolCall, ToolCallID: id, ToolName: "bash", ToolInput: `{"command":"ls"}`})
	}
	return m
}

func resultMsg(id, out string) model.Message {
	return model.Message{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: id, ToolName: "bash", Text: out}}, Time: t0}
}

// sampleTree is the seed example with two forks at different boundaries and
// a fork of a fork, plus a message full of escape sequences.
func sampleTree() *treeData {
	root := model.Run{ID: "root0000aaaa", TreeID: "root0000aaaa", Title: "weather", Harness: "openai", Status: model.Completed, CreatedAt: t0}
	rootMsgs := []model.Message{
		text(model.User, "What is the weather in Paris, Rome and Oslo?"),
		callMsg("tc1", "tc2", "tc3"),
		resultMsg("tc1", "Paris: 18C"),
		resultMsg("tc2", "Rome: 24C \x1b]52;c;ZXZpbA==\x07\x1b[2J"),
		resultMsg("tc3", "Oslo: 9C"),
		text(model.Assistant, "Paris is **18C**, Rome 24C, Oslo 9C."),
	}
	a := model.Run{ID: "forkaaaa1111", TreeID: root.ID, ParentID: root.ID, ForkAt: 1, Asked: "3", SnapReason: "mid tool batch",
		Name: "ask-again", Harness: "script", Status: model.Completed, CreatedAt: t0.Add(time.Minute), Usage: model.Usage{InputTokens: 300, OutputTokens: 20}}
	aMsgs := []model.Message{text(model.User, "Only Paris, please."), text(model.Assistant, "Paris: 18C.")}
	b := model.Run{ID: "forkbbbb2222", TreeID: root.ID, ParentID: root.ID, ForkAt: 5, Name: "terse", Harness: "script",
		Status: model.Failed, Error: "rate limited", CreatedAt: t0.Add(2 * time.Minute)}
	bMsgs := []model.Message{text(model.Assistant, "18/24/9")}
	c := model.Run{ID: "forkcccc3333", TreeID: root.ID, ParentID: a.ID, ForkAt: 2, Name: "nested", Harness: "script",
		Status: model.Pending, CreatedAt: t0.Add(3 * time.Minute)}
	return newTreeData([]model.Run{root, a, b, c}, map[string][]model.Message{
		root.ID: rootMsgs, a.ID: aMsgs, b.ID: bMsgs,
	})
}

// longTree is one run of n messages in tool batches, like a long agent session.
func longTree(n int) *treeData {
	root := model.Run{ID: "long0000", TreeID: "long0000", Title: "long", Harness: "claude", Status: model.Completed, CreatedAt: t0}
	msgs := make([]model.Message, 0, n)
	for i := 0; len(msgs) < n; i++ {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs, text(model.User, fmt.Sprintf("step %d: refactor the next file and run the tests", i)),
			callMsg(id), resultMsg(id, "ok\ttine/store\t0.01s"), text(model.Assistant, "Done; tests pass. "+fmt.Sprint(i)))
	}
	msgs = msgs[:n]
	return newTreeData([]model.Run{root}, map[string][]model.Message{root.ID: msgs})
}

var (
	lipglossBlack = color.RGBA{0, 0, 0, 255}
	lipglossWhite = color.RGBA{255, 255, 255, 255}
)

func TestMain(m *testing.M) {
	time.Local = time.UTC // golden screens show times
	code := m.Run()
	closeScaleStore()
	os.Exit(code)
}

type modelMsg = model.Message

func textMsg(s string) model.Message { return text(model.Assistant, s) }

// ownMsgs is every own message of r, which the fixtures hold in memory.
func (r *runData) ownMsgs() []model.Message {
	msgs, _ := r.body.span(0, r.n)
	return msgs
}
