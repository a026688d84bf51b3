package tui

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/importer"
	"tine/harness/registry"
	"tine/model"
	"tine/store"
)

// outline lists a tree's rows: "⑂name" for a fork or subagent line, and
// "run#K" for a message, indented by depth.
func outline(d *treeData) []string {
	var got []string
	for _, r := range d.flatten(nil) {
		rd := d.runs[r.run]
		pad := strings.Repeat(" ", int(r.depth))
		if r.kind == rowFork {
			got = append(got, pad+"⑂"+rd.run().Label())
		} else {
			got = append(got, pad+rd.run().Label()+"#"+string(rune('0'+r.msg+1)))
		}
	}
	return got
}

// TestSubagentsSitUnderTheirCalls: each subagent shows right under the
// tool call that started it, whatever order they were created in; one no
// call started (a compaction agent) goes at the end and holds none back.
func TestSubagentsSitUnderTheirCalls(t *testing.T) {
	main := model.Run{ID: "main", TreeID: "main", Name: "main", Harness: "claude", CreatedAt: t0}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	runs := []model.Run{main,
		// Created first, but started by the second call.
		{ID: "late", TreeID: "late", Name: "late", SpawnedBy: "main", SpawnedCall: "t2", CreatedAt: at(5)},
		{ID: "compact", TreeID: "compact", Name: "compact", SpawnedBy: "main", CreatedAt: at(1)},
		{ID: "early", TreeID: "early", Name: "early", SpawnedBy: "main", SpawnedCall: "t1", CreatedAt: at(20)},
	}
	own := map[string][]model.Message{
		"main": {text(model.User, "look twice"), callMsg("t1"), resultMsg("t1", "left"),
			callMsg("t2"), resultMsg("t2", "right"), text(model.Assistant, "both clear")},
		"late":    {text(model.User, "right side"), text(model.Assistant, "right is clear")},
		"early":   {text(model.User, "left side"), text(model.Assistant, "left is clear")},
		"compact": {text(model.User, "summarise"), text(model.Assistant, "summary")},
	}
	assert.Equal(t, []string{
		"main#1", "main#2",
		" ⑂early", " early#1", " early#2",
		"main#3", "main#4",
		" ⑂late", " late#1", " late#2",
		"main#5", "main#6",
		" ⑂compact", " compact#1", " compact#2",
	}, outline(newTreeData(runs, own)))
}

// TestSubagentsOfACompactedSession: a real Claude session with two
// subagents and a compaction agent between them in time.
func TestSubagentsOfACompactedSession(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "tine.db"))
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	files, err := importer.Expand([]string{"../testdata/claude/edge/compaction"})
	require.NoError(t, err)
	_, err = importer.Import(ctx, st, files, importer.Options{Formats: importer.FormatsOf(registry.Agents())})
	require.NoError(t, err)
	d, err := LoadTree(ctx, st, firstTree(t, st), nil)
	require.NoError(t, err)
	require.NoError(t, d.preload(ctx, d.flatten(nil), "", 0, 1000), "every message, to look at")
	var got []string
	for _, r := range d.flatten(nil) {
		rd := d.runs[r.run]
		switch {
		case r.kind == rowFork:
			got = append(got, "⑂"+rd.run().SpawnedCall)
		case rd.subagent:
		default:
			for _, p := range rd.message(int(r.msg)).Parts {
				if p.Kind == model.ToolCall {
					got = append(got, "call "+p.ToolCallID)
				}
			}
		}
	}
	assert.Equal(t, []string{"call toolu_1", "⑂toolu_1", "call toolu_2", "⑂toolu_2", "⑂"}, got)
}
