package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/modelserver"
)

// rpcClient speaks plain JSON-RPC 2.0, one message a line, to a `tine mcp`
// process: what any MCP client does, without an SDK.
type rpcClient struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
	id  int
}

func startMCP(t *testing.T, db string, env ...string) *rpcClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, os.Args[0], "--db", db, "mcp")
	cmd.Env = append(append(os.Environ(), "TINE_TEST_AS_TINE=1"), env...)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		cancel()
	})
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	c := &rpcClient{t: t, in: in, out: sc}
	init := c.call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "plain", "version": "1"}})
	require.Equal(t, "tine", init["serverInfo"].(map[string]any)["name"])
	c.notify("notifications/initialized", map[string]any{})
	return c
}

func (c *rpcClient) notify(method string, params any) {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	require.NoError(c.t, err)
	_, err = c.in.Write(append(b, '\n'))
	require.NoError(c.t, err)
}

// call sends a request and returns its result (failing on a JSON-RPC
// error).
func (c *rpcClient) call(method string, params any) map[string]any {
	c.t.Helper()
	c.id++
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	require.NoError(c.t, err)
	_, err = c.in.Write(append(b, '\n'))
	require.NoError(c.t, err)
	for c.out.Scan() {
		var m struct {
			ID     *int            `json:"id"`
			Result map[string]any  `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		require.NoError(c.t, json.Unmarshal(c.out.Bytes(), &m), c.out.Text())
		if m.ID == nil || *m.ID != c.id {
			continue // a notification
		}
		require.Nil(c.t, m.Error, string(m.Error))
		return m.Result
	}
	c.t.Fatalf("tine mcp ended: %v", c.out.Err())
	return nil
}

// tool calls a tool and returns its text and whether it is an error.
func (c *rpcClient) tool(name string, args map[string]any) (string, bool) {
	c.t.Helper()
	res := c.call("tools/call", map[string]any{"name": name, "arguments": args})
	content := res["content"].([]any)
	require.Len(c.t, content, 1)
	isErr, _ := res["isError"].(bool)
	return content[0].(map[string]any)["text"].(string), isErr
}

// TestMCPServesTheCommands: a plain JSON-RPC client lists tine's tools,
// forks a session through fork_session and reads the forks back with
// compare; each answer is the command's --json, and a failure is a tool
// error with the command's reason.
func TestMCPServesTheCommands(t *testing.T) {
	t.Parallel()
	db, id := importSeed(t)
	c := startMCP(t, db)
	tools := c.call("tools/list", map[string]any{})["tools"].([]any)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	assert.ElementsMatch(t, []string{"list_sessions", "search", "show", "checkpoints", "fork_session", "run", "compare", "replay", "apply", "merge_fork", "cancel", "fork_status"}, names)

	text, isErr := c.tool("search", map[string]any{"query": "paris", "limit": 2})
	require.False(t, isErr, text)
	want, _, code := tine(t, db, "search", "paris", "--limit", "2", "--json")
	require.Equal(t, 0, code)
	assert.JSONEq(t, want, text, "the command's own --json")
	text, isErr = c.tool("search", map[string]any{"query": "--limit 0"})
	require.False(t, isErr, text)
	assert.Contains(t, text, `"query": "--limit 0"`, "words, never a flag")

	text, isErr = c.tool("checkpoints", map[string]any{"run": id[:8]})
	require.False(t, isErr, text)
	want, _, code = tine(t, db, "checkpoints", id[:8], "--json")
	require.Equal(t, 0, code)
	assert.JSONEq(t, want, text, "the command's own --json")

	text, isErr = c.tool("fork_session", map[string]any{"session": id, "n": 2, "messages": []string{"Only Paris", "Only Rome"},
		"names": []string{"mcp-a", "mcp-b"}, "at": "3", "harness": "script", "wait": true})
	require.False(t, isErr, text)
	var forks struct {
		Forks []forkJSON `json:"forks"`
	}
	require.NoError(t, json.Unmarshal([]byte(text), &forks))
	require.Len(t, forks.Forks, 2)
	for _, f := range forks.Forks {
		assert.Equal(t, "completed", f.Status, f.Error)
	}

	text, isErr = c.tool("compare", map[string]any{"runs": []string{"mcp-a", "mcp-b"}})
	require.False(t, isErr, text)
	var cmp comparison
	require.NoError(t, json.Unmarshal([]byte(text), &cmp))
	require.Len(t, cmp.Runs, 2)

	text, isErr = c.tool("show", map[string]any{"run": "no-such-run"})
	assert.True(t, isErr)
	assert.Contains(t, text, "no-such-run")
	assert.NotContains(t, text, "\n", "one line")

	text, isErr = c.tool("fork_session", map[string]any{"session": id, "message": "a", "messages": []string{"b"}})
	assert.True(t, isErr)
	assert.Contains(t, text, "not both")
	// A budget goes with the fork, as --max-tokens; one tine cannot keep
	// is refused as the command refuses it.
	text, isErr = c.tool("fork_session", map[string]any{"session": id, "message": "Only Oslo", "names": []string{"mcp-budget"},
		"at": "3", "harness": "script", "max_tokens": "200,000", "wait": true})
	require.False(t, isErr, text)
	var budgeted struct {
		Forks []struct {
			Status string `json:"status"`
			Budget *struct {
				MaxTokens int64 `json:"max_tokens"`
			} `json:"budget"`
		} `json:"forks"`
	}
	require.NoError(t, json.Unmarshal([]byte(text), &budgeted), text)
	require.Len(t, budgeted.Forks, 1)
	require.NotNil(t, budgeted.Forks[0].Budget, text)
	assert.Equal(t, int64(200_000), budgeted.Forks[0].Budget.MaxTokens)
	text, isErr = c.tool("run", map[string]any{"run": "mcp-budget", "message": "and Rome", "max_tokens": "0"})
	assert.True(t, isErr)
	assert.Contains(t, text, "max-tokens", "the command's own refusal")

	// apply answers as tine apply does: a script fork has no worktree to
	// bring in, which is the command's refusal, as a tool error.
	_, wantErr, code := tine(t, db, "apply", "mcp-a", "--json")
	require.NotEqual(t, 0, code)
	text, isErr = c.tool("apply", map[string]any{"fork": "mcp-a"})
	assert.True(t, isErr)
	assert.Contains(t, strings.TrimSpace(wantErr), strings.TrimSpace(text))
}

// merge_fork answers as tine merge --json does; forks go after --, so a
// fork named like a flag is a fork; what the command refuses is a tool
// error with its reason.
func TestMCPMergeFork(t *testing.T) {
	t.Parallel()
	db := scriptTree(t)
	_, errOut, code := tine(t, db, "fork", "parent", "--name", "-x", "-m", "try a dash", "--wait")
	require.Equal(t, 0, code, errOut)
	c := startMCP(t, db)

	text, isErr := c.tool("merge_fork", map[string]any{"forks": []string{"a", "-x"}, "dry_run": true})
	require.False(t, isErr, text)
	var dry dryRunJSON
	require.NoError(t, json.Unmarshal([]byte(text), &dry), text)
	assert.True(t, dry.DryRun)
	assert.Contains(t, dry.Message, `Fork "-x" (script`)
	_, before := messagesOf(t, db, "parent")

	text, isErr = c.tool("merge_fork", map[string]any{"forks": []string{"a", "b"}, "summary": "--into is not a flag here", "wait": true})
	require.False(t, isErr, text)
	var res mergeJSON
	require.NoError(t, json.Unmarshal([]byte(text), &res), text)
	parent, msgs := messagesOf(t, db, "parent")
	assert.Equal(t, parent.ID, res.Merge.Run)
	assert.Equal(t, len(before), res.Merge.At)
	require.Greater(t, len(msgs), len(before))
	assert.Contains(t, msgs[len(before)].PlainText(), "From the person:\n  --into is not a flag here")

	text, isErr = c.tool("merge_fork", map[string]any{"forks": []string{"a", "b"}, "apply": true})
	assert.True(t, isErr)
	assert.Contains(t, text, "--apply brings one fork's files home")
	text, isErr = c.tool("merge_fork", map[string]any{"forks": []string{}})
	assert.True(t, isErr)
	assert.Contains(t, text, "name at least one fork")
}

// TestMCPRunNamesAreData: what a tool is given as a run is a run's name,
// never a flag of tine's: compare of "--db=PATH" names no run, and no
// database, nor its folder, is made there (tine mcp ran the command line
// with the runs as its arguments, so this opened a database of the
// caller's choosing).
func TestMCPRunNamesAreData(t *testing.T) {
	t.Parallel()
	db, id := importSeed(t)
	c := startMCP(t, db)
	elsewhere := filepath.Join(t.TempDir(), "sub", "x.db")
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"compare", map[string]any{"runs": []string{"--db=" + elsewhere, id, id}}},
		{"compare", map[string]any{"runs": []string{"--db", elsewhere, id}}},
		{"show", map[string]any{"run": "--db=" + elsewhere}},
		{"checkpoints", map[string]any{"run": "--help"}},
		{"fork_session", map[string]any{"session": "--db=" + elsewhere, "harness": "script"}},
		{"merge_fork", map[string]any{"forks": []string{"--db=" + elsewhere}}},
	} {
		text, isErr := c.tool(call.tool, call.args)
		assert.True(t, isErr, "%s %v: %s", call.tool, call.args, text)
		assert.Contains(t, text, "not found", "%s %v", call.tool, call.args)
	}
	_, err := os.Stat(filepath.Dir(elsewhere))
	assert.True(t, os.IsNotExist(err), "nothing was made where the flag pointed")
}

// raw sends line as it is and returns the next message tine mcp writes.
func (c *rpcClient) raw(line string) map[string]any {
	c.t.Helper()
	_, err := io.WriteString(c.in, line+"\n")
	require.NoError(c.t, err)
	require.True(c.t, c.out.Scan(), "tine mcp ended: %v", c.out.Err())
	var m map[string]any
	require.NoError(c.t, json.Unmarshal(c.out.Bytes(), &m), c.out.Text())
	return m
}

// TestMCPAnswersBadFramesAndGoesOn: a line that is no message tine mcp
// takes gets a JSON-RPC error (-32700 when it is no JSON, -32600 when it
// is no request it takes), with its id when it has one, and the server
// answers the next call: one bad line no longer ends every later call.
func TestMCPAnswersBadFramesAndGoesOn(t *testing.T) {
	t.Parallel()
	db, _ := importSeed(t)
	c := startMCP(t, db)
	huge := `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"search","arguments":{"query":"` +
		strings.Repeat("a", 50<<20) + `"}}}`
	deep := `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"search","arguments":{"query":"x","limit":` +
		strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}}}`
	for _, tc := range []struct {
		name, line string
		code       float64
		id         any
	}{
		{"truncated JSON", `{"jsonrpc":"2.0","id":7,"method":"tools/list"`, -32700, nil},
		{"text", `hello, tine`, -32700, nil},
		{"an empty batch", `[]`, -32600, nil},
		{"a batch", `[{"jsonrpc":"2.0","id":8,"method":"tools/list"}]`, -32600, nil},
		{"JSON-RPC 1.0", `{"jsonrpc":"1.0","id":9,"method":"tools/list"}`, -32600, float64(9)},
		{"no version", `{"id":"nine","method":"tools/list"}`, -32600, "nine"},
		{"a 50 MB line", huge, -32600, nil},
		{"100,000 levels deep", deep, -32600, nil},
		{"an id and no method", `{"jsonrpc":"2.0","id":12}`, -32600, float64(12)},
		{"a number", `42`, -32600, nil},
		{"an object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, -32600, nil},
	} {
		m := c.raw(tc.line)
		e, ok := m["error"].(map[string]any)
		require.True(t, ok, "%s: %v", tc.name, m)
		assert.Equal(t, tc.code, e["code"], "%s: %v", tc.name, e["message"])
		assert.Equal(t, tc.id, m["id"], tc.name)
		assert.Equal(t, "2.0", m["jsonrpc"], tc.name)
		tools := c.call("tools/list", map[string]any{})["tools"].([]any)
		assert.NotEmpty(t, tools, "the server answers after %s", tc.name)
	}
}

// TestMCPAnswersCallsInFlightWhenStdinCloses: a client that sends its
// calls and closes stdin gets every answer, a fork's that takes a while
// included, before tine mcp exits.
func TestMCPAnswersCallsInFlightWhenStdinCloses(t *testing.T) {
	t.Parallel()
	srv, err := modelserver.Start(modelserver.Options{Model: "test-model", Logf: func(string, ...any) {}})
	require.NoError(t, err)
	defer srv.Close()
	srv.Push(modelserver.Reply{Text: "one two three four five six seven eight", ChunkDelay: 150 * time.Millisecond})
	db, id := importSeed(t)
	c := startMCP(t, db, "OPENAI_BASE_URL="+srv.URL()+"/v1", "OPENAI_API_KEY=sk-test")
	for i, call := range []map[string]any{
		{"name": "fork_session", "arguments": map[string]any{"session": id, "message": "slowly", "names": []string{"slow"},
			"harness": "openai", "model": "test-model", "wait": true}},
		{"name": "search", "arguments": map[string]any{"query": "paris"}},
	} {
		b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": call})
		require.NoError(t, err)
		_, err = c.in.Write(append(b, '\n'))
		require.NoError(t, err)
	}
	require.NoError(t, c.in.Close())
	answered := map[float64]string{}
	for c.out.Scan() {
		var m struct {
			ID     *float64 `json:"id"`
			Result struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
				IsError bool `json:"isError"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(c.out.Bytes(), &m), c.out.Text())
		if m.ID != nil && len(m.Result.Content) > 0 {
			assert.False(t, m.Result.IsError, m.Result.Content[0].Text)
			answered[*m.ID] = m.Result.Content[0].Text
		}
	}
	require.Contains(t, answered, float64(100), "the fork was answered")
	require.Contains(t, answered, float64(101), "the search was answered")
	assert.Contains(t, answered[100], `"status": "completed"`)
	assert.Contains(t, answered[100], `"messages": 8`, "the message and the slow reply")
}
