package replay_test

import (
	"fmt"
	"os"

	"tine/replay"
)

// One gateway per tine process; each run gets its own base URL. A
// recording forwards to the real API with the real key; a replay answers
// steps 1..N from the tape and goes live after.
func Example() {
	g, err := replay.Start(replay.Options{Upstreams: map[replay.Wire]replay.Upstream{
		replay.WireAnthropic: {BaseURL: "https://api.anthropic.com", APIKey: os.Getenv("ANTHROPIC_API_KEY")},
		replay.WireResponses: {BaseURL: "https://api.openai.com/v1", APIKey: os.Getenv("OPENAI_API_KEY")},
	}})
	if err != nil {
		panic(err)
	}
	defer g.Close()

	// Record: the agent gets the gateway's URL and the run's key (in its
	// environment, never on its command line); the real key stays here.
	tape := &replay.MemRecorder{}
	rec, _ := g.NewRun(replay.RunConfig{ID: "run-1", Recorder: tape})
	_ = []string{"ANTHROPIC_BASE_URL=" + rec.URL(), "ANTHROPIC_API_KEY=" + rec.Key()}
	// ... the agent runs ...
	rec.Close()

	// Replay to step 2 in a fresh worktree, then live.
	fork := &replay.MemRecorder{}
	rp, _ := g.NewRun(replay.RunConfig{ID: "run-1-fork-1", Tape: tape.Steps(), N: 2, Recorder: fork})
	// ... the agent runs again, pointed at rp.URL() with rp.Key() ...
	if d := rp.Status().Divergence; d != nil {
		fmt.Println(d.Detail()) // e.g. "step 3: tool: messages[5].content[0].content differs (-first line)"
		fmt.Print(d.Diff)
	}
	rp.Close()
}
