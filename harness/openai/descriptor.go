package openai

import (
	"bytes"
	"io"

	"tine/harness"
)

// Agent is everything tine knows of the OpenAI-compatible Chat Completions
// API, in one place (ARCHITECTURE.md, "One place per agent").
var Agent = harness.Agent{
	Name:    "openai",
	Display: "OpenAI-compatible API",
	// tine sends the whole prefix, so it forks anywhere and resumes; it
	// streams, and runs no tools.
	Caps: harness.Capabilities{Fork: true, ForkAtK: true, Resume: true, Stream: true},
	New: func(s harness.Setup) harness.Harness {
		c := ConfigFromEnv()
		if s.BaseURL != "" {
			c.BaseURL = s.BaseURL
		}
		if s.APIKey != "" {
			c.APIKey = s.APIKey
		}
		c.WrapTransport = s.Transport
		return New(c)
	},
	Needs: []string{"OPENAI_BASE_URL (default " + DefaultBaseURL + ")", "OPENAI_API_KEY (not for local servers)", "OPENAI_MODEL or --model"},
	// The OpenAI chat shape, read from files given to tine import (it
	// has no folder of its own); tried after every agent's format.
	Sessions: &harness.Sessions{Detect: looksLikeChat, Parse: parseFile},
	NoCLI:    "a model API: tine sends the requests itself",
	NoOpen:   "an openai run is a chat tine sent to the API itself: there is no agent session to open",
	NoCarry:  "a model API runs no tools: its turns run in tine itself, with nothing to keep apart",
	NoRecord: "tine makes its model calls itself, so --record stores them through its transport (Setup.Transport); a replay needs an agent that runs its tools again",
	API:      &harness.API{KeyEnv: "OPENAI_API_KEY", URLEnv: "OPENAI_BASE_URL", ModelEnv: "OPENAI_MODEL", DefaultURL: DefaultBaseURL},
}

// looksLikeChat tells the chat shape from a file's first bytes: JSON that
// names a role.
func looksLikeChat(head []byte) bool {
	trimmed := bytes.TrimSpace(head)
	return len(trimmed) > 0 && (trimmed[0] == '[' || trimmed[0] == '{') && bytes.Contains(head, []byte(`"role"`))
}

// parseFile reads a whole chat file into one run.
func parseFile(r io.Reader, name string) (harness.ParsedFile, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return harness.ParsedFile{}, err
	}
	t, err := Parse(data, name)
	pf := harness.ParsedFile{Skipped: t.Skipped, Offset: int64(len(data))}
	if err != nil {
		return pf, err
	}
	pf.Runs = []harness.ParsedRun{{Transcript: t, Parent: -1}}
	return pf, nil
}

// Descriptor implements harness.Described.
func (*Harness) Descriptor() harness.Agent { return Agent }
