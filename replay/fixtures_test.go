package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"tine/internal/modelserver"
)

// fixture is a real request of an agent CLI, as recorded against the
// scripted model server (testdata/agents/out/<cli>/requests.jsonl), with
// the reply the server gave it.
type fixture struct {
	Path  string             `json:"path"`
	Body  json.RawMessage    `json:"body"`
	Reply *modelserver.Reply `json:"reply"`
}

// cli is one agent's fixtures and the strings in its requests that a
// replay legitimately changes, or that a test changes to make it diverge.
type cli struct {
	name string
	wire Wire
	// main are the main session's first three requests: say hello; run a
	// command (the answer calls a tool); the tool's output goes back.
	main []fixture
	// toolOut is the tool output in main[2], as it appears in the JSON.
	toolOut string
	// system is a string of the system prompt (main[*]).
	system string
	// cwd, date: as they appear.
	cwd, date string
	// volatile are other strings that change between runs of the CLI
	// (ids, timings), each with a stand-in.
	volatile [][2]string
	// setting is a model setting in the body, another value for it, and
	// its field: "model" where the body names the model (the Gemini API's
	// is in the path).
	setting [3]string
}

// bodyModel is the setting of the wires whose body names the model.
var bodyModel = [3]string{`"model":"`, `"model":"x-`, "model"}

var clis = []cli{
	{name: "claude", wire: WireAnthropic, toolOut: `hi\nREADME.md\nnotes.txt`,
		system: "You are an agent working with the user toward their goals",
		cwd:    "/tmp/tine-gen/project", date: "2026-11-29",
		volatile: [][2]string{
			{"bdf46d96-8219-4f20-a09e-98bcce594a76", "00000000-1111-4222-8333-444444444444"}, // session id in metadata
			{"22533f5d91d08369c49ecf71a27a605f7e321c2b5cad609a49136aeee149e4a6", "ffff"},     // device id
			{`Current branch: main`, `Current branch: main-fork-1`},                          // gitStatus
			{`Status:\n(clean)`, `Status:\nM notes.txt\n?? scratch.txt`},
			{`7ed1f70 initial commit`, `9a9a9a9 replay base`},
			{`{"type":"ephemeral"}`, `{"type":"ephemeral","ttl":"1h"}`}, // cache markers
			{"toolu_tine0002_0", "toolu_01ABCdefGHIjklMNOpqrSTU"},       // tool-use ids
		}, setting: bodyModel},
	{name: "codex", wire: WireResponses, toolOut: `hi\nREADME.md\nnotes.txt`,
		system: "You are Codex, a coding agent based on GPT-5.",
		cwd:    "/tmp/tine-gen/project", date: "2026-11-29",
		volatile: [][2]string{
			{"01a226a4-b365-74a1-840d-b54d8735afec", "01a226a4-ffff-7000-8000-000000000000"}, // session/thread id
			{"01a226a4-b496-7ec0-95f0-e62d9ef4abaf", "01a226a4-eeee-7000-8000-000000000000"}, // turn id
			{"msg_01a226a4-b3ad-7043-88d9-524765ecc3a3", "msg_other-1"},                      // input item ids
			{"fco_01a226a4-b52b-7f92-a1c2-eed59f3d6e65", "fco_other-2"},
			{"Chunk ID: 87afc7", "Chunk ID: 0c0ffe"},
			{"Wall time: 0.0000 seconds", "Wall time: 0.0213 seconds"},
			{"7ed1f70a693713b2c05ef5815214e252fd3bafb9", "9a9a9a9a693713b2c05ef5815214e252fd3bafb9"},
			{"call_tine0002_0", "call_Zx81"}, // tool-call ids
		}, setting: bodyModel},
	{name: "pi", wire: WireChat, toolOut: `hi\nREADME.md\nnotes.txt`,
		system: "You are an expert coding assistant operating inside pi",
		cwd:    "/tmp/tine-gen/project", date: "2026-11-29",
		volatile: [][2]string{
			{"call_tine0002_0", "call_Zx81"}, // tool-call ids
		}, setting: bodyModel},
	{name: "gemini", wire: WireGemini, toolOut: `hi\nREADME.md\nnotes.txt`,
		system: "You are a non-interactive CLI agent specializing in software engineering tasks.",
		cwd:    "/tmp/tine-gen/project", date: "Tuesday, December 1, 2026",
		volatile: [][2]string{
			// The project's temporary folder, named after the directory.
			{"/tmp/tine-gen/home-gemini/.gemini/tmp/project", "/tmp/tine-gen/home-gemini/.gemini/tmp/run-fork-1"},
			{"Process Group PGID: 11720", "Process Group PGID: 4242"},
			// Tool-call ids: Gemini CLI makes its own when the API gives none.
			{"call_tine0002_0", "synth_2b1c_1796162364916_0"},
		}, setting: [3]string{`"temperature":1`, `"temperature":0.5`, "generationConfig.temperature"}},
}

func loadCLI(t testing.TB, c *cli) {
	t.Helper()
	if c.main != nil {
		return
	}
	f, err := os.Open(filepath.Join("..", "testdata", "agents", "out", c.name, "requests.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() && len(c.main) < 3 {
		var fx fixture
		if err := json.Unmarshal(sc.Bytes(), &fx); err != nil {
			t.Fatal(err)
		}
		fx.Reply.Match = nil
		c.main = append(c.main, fx)
	}
	if len(c.main) != 3 {
		t.Fatalf("%s: %d requests", c.name, len(c.main))
	}
	if !bytes.Contains(c.main[2].Body, []byte(c.toolOut)) {
		t.Fatalf("%s: request 3 has no tool output %q", c.name, c.toolOut)
	}
}

// replace returns body with every old replaced by new, failing when old is
// not there (so a fixture change cannot make a test pass vacuously).
func replace(t testing.TB, body []byte, old, new string) []byte {
	t.Helper()
	if !bytes.Contains(body, []byte(old)) {
		t.Fatalf("%q is not in the request", old)
	}
	return bytes.ReplaceAll(body, []byte(old), []byte(new))
}

// reorder re-marshals a body through a map: the same request, keys sorted.
func reorder(t testing.TB, body []byte) []byte {
	var v any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
