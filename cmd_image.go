package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"tine/harness"
	"tine/harness/place/docker"
	"tine/harness/registry"
	"tine/model"
)

// cmdImage makes the images agents' forks run in on a Docker daemon
// (--on docker).
func cmdImage(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "image", "build [AGENT...] [--offline] [--tag NAME] [--on docker[:CONTEXT]]",
		"Make the image an agent's forks run in with --on docker: its pinned npm package and git\n"+
			"on a Node base image, tagged tine/<agent>:latest. --offline (and a build that cannot pull\n"+
			"its base image) assembles the image from the agent installed on this machine instead:\n"+
			"its npm package, node, the libraries they link, busybox for a shell, and git; nothing\n"+
			"is pulled. The agent is then tried in it (its --version). No AGENT: every agent that\n"+
			"can run in a container and is installed here.")
	offline := f.Bool("offline", false, "assemble the image from this machine's installed agent; pull nothing")
	tag := f.String("tag", "", "the image's `name` (default tine/<agent>:latest; one AGENT only)")
	on := f.String("on", os.Getenv("TINE_ON"), "the Docker daemon: docker (DOCKER_HOST, or the current docker context) or docker:CONTEXT")
	pos, err := f.parse(args, 1, -1)
	if err != nil {
		return err
	}
	if pos[0] != "build" {
		return usagef("image: the one subcommand is build (tine image build [AGENT] [--offline]), not %q", pos[0])
	}
	pos = pos[1:]
	if *tag != "" && len(pos) != 1 {
		return usagef("image build: --tag names one image: give one AGENT")
	}
	where := *on
	if where == "" || where == "local" {
		where = docker.Kind
	}
	if !strings.HasPrefix(where, docker.Kind) {
		return usagef("image build: --on is docker or docker:CONTEXT, not %q", *on)
	}
	var agents []harness.Agent
	for _, a := range registry.Agents() {
		if a.Carry == nil || a.CLI == nil {
			continue
		}
		if len(pos) == 0 && installedBin(a) == "" {
			continue
		}
		agents = append(agents, a)
	}
	if len(pos) > 0 {
		var picked []harness.Agent
		for _, name := range pos {
			found := false
			for _, a := range agents {
				if a.Name == name {
					picked, found = append(picked, a), true
				}
			}
			if !found {
				return usagef("image build: %q is not an agent whose forks run in containers (%s)", name, names(agents))
			}
		}
		agents = picked
	}
	if len(agents) == 0 {
		return errors.New("no agent that runs in a container is installed here: name one (tine image build claude), or install one")
	}
	p, err := docker.New(where, docker.Config{Environ: os.Environ()})
	if err != nil {
		return err
	}
	defer p.Close()
	say := func(s string) { fmt.Fprintln(e.stderr, "tine: "+model.SafeText(s)) }
	for _, a := range agents {
		img, err := p.BuildImage(ctx, docker.Build{Agent: a, Tag: *tag, Offline: *offline, Bin: installedBin(a)}, say)
		if err != nil {
			return fmt.Errorf("%s's image: %w", a.Display, err)
		}
		fmt.Fprintf(e.stdout, "%s: %s is ready on %s (tine fork RUN --on %s)\n", a.Name, img, p.Endpoint(), where)
	}
	return nil
}

// installedBin is where agent a's program is on this machine ("" when it is
// not): its variable's path, else the name in PATH.
func installedBin(a harness.Agent) string {
	bin := a.CLI.Bin
	if a.CLI.BinVar != "" && os.Getenv(a.CLI.BinVar) != "" {
		bin = os.Getenv(a.CLI.BinVar)
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return ""
	}
	return p
}

func names(agents []harness.Agent) string {
	var n []string
	for _, a := range agents {
		n = append(n, a.Name)
	}
	return strings.Join(n, ", ")
}
