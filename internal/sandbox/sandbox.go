// Package sandbox runs an agent's CLI in a jail where the platform has
// one: on Linux, bubblewrap (bwrap), with a network namespace of its own,
// the whole file system read-only but for the paths given, and an
// environment without credentials. It is how a replayed agent is held
// (rule 9 and rule 13 in ARCHITECTURE.md): it runs every tool call of a
// recorded run again, and must reach nothing but its worktree, its own
// state and tine's gateway.
//
// The jail has no network at all, loopback included (its loopback is its
// own): the gateway is reached through a Unix socket, which a relay inside
// the jail serves on 127.0.0.1 at the gateway's own port, so the agent's
// base URL is the same inside as out. The relay is tine itself, run again
// as `tine __relay SOCKET PORT -- COMMAND...` (RelayMain); it starts the
// agent as its child and exits with it.
//
// Elsewhere (macOS, or Linux without a bwrap that works) Available says
// why there is no sandbox, and a replay is held by its proxy variables
// only (README: Isolation).
package sandbox

import (
	"errors"
	"os"
	"slices"
	"strings"
)

// RelayArg is the first argument that makes tine the relay (RelayMain).
const RelayArg = "__relay"

// Spec is one program's jail.
type Spec struct {
	// Writable are the paths the program may write (folders or files):
	// the worktree it works in, its own state (its sessions, settings),
	// TmpDir. Everything else is read-only. A path that does not exist is
	// skipped.
	Writable []string
	// Socket is a Unix socket the program reaches as 127.0.0.1:Port (the
	// gateway): the only thing it reaches beyond the jail.
	Socket string
	Port   int
	// Keep are the values of credential-looking variables that stay in the
	// environment: the gateway run's key, which the agent must send (it
	// opens nothing but that run). Every other such variable is removed
	// (Scrub).
	Keep []string
	// TmpDir is the program's temporary folder (TMPDIR), writable.
	TmpDir string
	// Relay is the program run as the relay inside the jail (tine:
	// RelayArg); "" is os.Executable().
	Relay string
}

// With is s with more writable paths; nil stays nil (no jail).
func (s *Spec) With(paths ...string) *Spec {
	if s == nil {
		return nil
	}
	c := *s
	c.Writable = append(slices.Clip(s.Writable), paths...)
	return &c
}

// Command is the program, arguments and environment that run bin with
// args in the jail, in dir: env (the program's whole environment) without
// its credentials (Scrub, keeping Keep), with TMPDIR set to TmpDir.
func (s *Spec) Command(bin string, args []string, dir string, env []string) (string, []string, []string, error) {
	if err := Available(); err != nil {
		return "", nil, nil, err
	}
	relay := s.Relay
	if relay == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", nil, nil, err
		}
		relay = exe
	}
	env = Scrub(env, s.Keep)
	if s.TmpDir != "" {
		env = setenv(env, "TMPDIR", s.TmpDir)
	}
	return s.command(relay, bin, args, dir, env)
}

// setenv is env with key set to val.
func setenv(env []string, key, val string) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, key+"=") })
	return append(out, key+"="+val)
}

// credentialEnds end a part of a variable's name (between underscores)
// that says it holds a credential: OPENAI_API_KEY, GITHUB_TOKEN,
// PGPASSWORD, GOOGLE_APPLICATION_CREDENTIALS, SSH_AUTH_SOCK. A setting
// such as CLAUDE_CODE_MAX_OUTPUT_TOKENS is not one.
var credentialEnds = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "COOKIE", "AUTH"}

// Credential reports whether a variable named name looks like it holds a
// credential: a part of its name ends with one of credentialEnds, or
// begins with AUTH.
func Credential(name string) bool {
	for _, part := range strings.Split(strings.ToUpper(name), "_") {
		if strings.HasPrefix(part, "AUTH") {
			return true
		}
		for _, end := range credentialEnds {
			if strings.HasSuffix(part, end) {
				return true
			}
		}
	}
	return false
}

// Scrub is env without the variables whose names look like credentials
// (Credential), but those whose value is in keep or empty (an empty one
// only hides a credential).
func Scrub(env, keep []string) []string {
	var out []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if Credential(k) && v != "" && !slices.Contains(keep, v) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// ErrUnavailable is wrapped by Available's error.
var ErrUnavailable = errors.New("no sandbox")
