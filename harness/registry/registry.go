// Package registry lists every backend tine is built with. It is the one
// package besides main that names the agents: adding one is its package
// under harness/ and one line here (ARCHITECTURE.md, "One place per
// agent").
package registry

import (
	"tine/harness"
	"tine/harness/acp"
	"tine/harness/anthropic"
	"tine/harness/claude"
	"tine/harness/codex"
	"tine/harness/gemini"
	"tine/harness/openai"
	"tine/harness/opencode"
	"tine/harness/pi"
	"tine/harness/qwen"
	"tine/harness/script"
)

// Agents are tine's backends. Their order is the order transcript formats
// are detected in (the agents' own before the loose chat shape of
// openai's), and the order they are listed in where a list is not sorted.
func Agents() []harness.Agent {
	return []harness.Agent{
		claude.Agent,
		codex.Agent,
		pi.Agent,
		qwen.Agent,
		opencode.Agent, // its export JSON names an info with a ses_ id, no other agent's shape
		gemini.Agent,   // before openai's loose chat shape; its header (sessionId, projectHash) is no other agent's
		acp.Agent,
		openai.Agent,
		anthropic.Agent,
		script.Agent,
	}
}

// New is the registry of every backend, each harness made with setup.
func New(setup harness.Setup) *harness.Registry { return harness.Build(setup, Agents()...) }

// Agent is the backend named name.
func Agent(name string) (harness.Agent, bool) {
	for _, a := range Agents() {
		if a.Name == name {
			return a, true
		}
	}
	return harness.Agent{}, false
}
