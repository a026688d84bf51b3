package anthropic

import "tine/harness"

// Agent is everything tine knows of the Anthropic Messages API, in one
// place (ARCHITECTURE.md, "One place per agent").
var Agent = harness.Agent{
	Name:    "anthropic",
	Display: "Anthropic API",
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
	Needs:      []string{"ANTHROPIC_API_KEY", "ANTHROPIC_MODEL or --model", "ANTHROPIC_BASE_URL (default " + DefaultBaseURL + ")"},
	NoSessions: "its chats are tine's own: tine imports no transcript format of the Messages API",
	NoCLI:      "a model API: tine sends the requests itself",
	NoOpen:     "an anthropic run is a chat tine sent to the API itself: there is no agent session to open",
	NoCarry:    "a model API runs no tools: its turns run in tine itself, with nothing to keep apart",
	NoRecord:   "tine makes its model calls itself, so --record stores them through its transport (Setup.Transport); a replay needs an agent that runs its tools again",
	API:        &harness.API{KeyEnv: "ANTHROPIC_API_KEY", URLEnv: "ANTHROPIC_BASE_URL", ModelEnv: "ANTHROPIC_MODEL", DefaultURL: DefaultBaseURL},
}

// Descriptor implements harness.Described.
func (*Harness) Descriptor() harness.Agent { return Agent }
