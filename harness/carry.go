package harness

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Carry is how an agent's turn runs on another machine than tine's (a
// fork's container): what of this machine its turn needs there, and
// where its sessions live, so that a fork's origin session, and only
// that one, goes with it and its own session comes back. The other
// machine has the agent installed at its defaults: HOME holds its state,
// no variable moves it.
type Carry struct {
	// State are the folders under HOME, as the agent has them when no
	// variable moves them, that hold its sessions: what comes back from
	// the other machine after each turn, and goes there again when a
	// fork's container is made again.
	State []string
	// Config is where the agent's configuration and login are on this
	// machine, as environ says (CODEX_HOME, CLAUDE_CONFIG_DIR), each with
	// where it goes under the other machine's HOME. The files that are not
	// there are left out.
	Config func(environ []string) []CarriedFile
	// Env is the part of environ its turn needs there: its keys, base
	// URLs, model and switches; never a path of this machine.
	Env func(environ []string) []string
	// Locate is the file that holds session id among the agent's state
	// that environ points at (HOME and the agent's variables); for an
	// agent that keeps its sessions in a database, the session's
	// EntryPath.
	Locate func(environ []string, id string) (string, error)
	// Adopt, when set, makes a session file carried from another machine
	// known to the agent whose environment is environ, working in dir,
	// and says where its harness finds it (Origin.Source). Nil: the file
	// is its own source, wherever it is put (the harness copies it where
	// the agent looks, as it does an imported session's).
	Adopt func(ctx context.Context, environ []string, dir, file string) (source string, err error)
	// Opening, when set, readies the agent's state on the other machine
	// (HOME is its environ's) for a person to open a session working in
	// dir: the first-start questions they answered on this machine, which
	// a headless turn never asks.
	Opening func(environ []string, dir string) error
}

// CarriedFile is a file of this machine (Host) and where it goes under
// the other machine's HOME (Rel).
type CarriedFile struct {
	Host, Rel string
}

// ConfigFiles lists names in dir, each going to rel/name: the shape of
// most agents' Config.
func ConfigFiles(dir, rel string, names ...string) []CarriedFile {
	if dir == "" {
		return nil
	}
	out := make([]CarriedFile, 0, len(names))
	for _, n := range names {
		p := filepath.Join(dir, n)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			out = append(out, CarriedFile{Host: p, Rel: filepath.Join(rel, n)})
		}
	}
	return out
}

// PassEnv is the pairs of environ whose names are in names or start with
// one of prefixes (each ending in "_"), but for those named in except:
// what an agent's turn needs of this machine's environment elsewhere.
func PassEnv(environ []string, prefixes, names, except []string) []string {
	var out []string
	seen := map[string]int{}
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || contains(except, k) {
			continue
		}
		pass := contains(names, k)
		for _, p := range prefixes {
			pass = pass || strings.HasPrefix(k, p)
		}
		if !pass {
			continue
		}
		if i, ok := seen[k]; ok {
			out[i] = kv // a later pair wins, as in an environment
			continue
		}
		seen[k] = len(out)
		out = append(out, kv)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// envNameRe is a variable's name as configuration files refer to one.
var envNameRe = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// EnvNamed is the names among refs that read as an environment
// variable's (an agent's configuration names the variable holding a key:
// Codex's env_key, pi's apiKey, opencode's {env:NAME}).
func EnvNamed(refs ...string) []string {
	var out []string
	for _, r := range refs {
		if envNameRe.MatchString(r) {
			out = append(out, r)
		}
	}
	return out
}

// EnvFunc reads environ as os.Getenv reads the process's (Getenv).
func EnvFunc(environ []string) func(string) string {
	return func(key string) string { return Getenv(environ, key) }
}
