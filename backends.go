package main

import (
	"os"
	"slices"
	"strings"
	"sync"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/importer"
	"tine/harness/place"
	"tine/harness/place/docker"
	"tine/harness/registry"
	"tine/internal/service"
	"tine/store"
)

// backends is the registry of every backend tine is built with
// (harness/registry, the one list of them), each made with setup. With
// agents false it leaves out those that keep sessions of their own: the
// demo's sessions were made up, so it forks offline.
func backends(setup harness.Setup, agents bool) *harness.Registry {
	all := registry.Agents()
	if !agents {
		all = slices.DeleteFunc(all, func(a harness.Agent) bool { return a.Caps.OwnSessions })
	}
	return harness.Build(setup, all...)
}

// formats are the transcript formats tine imports, in detection order.
func formats() importer.Formats { return importer.FormatsOf(registry.Agents()) }

// defaultFolders says where an import with no PATH looks, agent by
// agent, as this environment has it.
func defaultFolders() string {
	var parts []string
	for _, a := range registry.Agents() {
		switch {
		case a.Sessions != nil && a.Sessions.Dirs != nil:
			parts = append(parts, a.Display+": "+strings.Join(a.Sessions.Dirs(), " or "))
		case a.Sessions != nil && a.Sessions.Database != nil && a.Sessions.Database.Files != nil:
			parts = append(parts, a.Display+": "+strings.Join(a.Sessions.Database.Files(), " or ")+" (its database)")
		}
	}
	return strings.Join(parts, "; ")
}

// newDriver wires the fork driver to a store, with every backend, as the
// flags say: the model APIs' address and key (paced slows the script
// harness so a person can watch), the permission policy, the check's
// timeout, and whether model calls are recorded. Agent forks' worktrees
// live next to the database, in tine's data dir.
// worktreesOf is where the forks of st's runs get their worktrees: beside
// the database, as private as it is.
func worktreesOf(st *store.Store) string { return service.WorktreesOf(st.Path()) }

func newDriver(st *store.Store, paced bool, api apiFlags, ag agentFlags) (*fork.Driver, error) {
	if ag.demo {
		return demoDriver(st, api), nil
	}
	paced = paced || ag.paced
	p, err := harness.ParsePermissions(ag.permissions)
	if err != nil {
		return nil, usageError{msg: err.Error()}
	}
	d := &fork.Driver{Store: st, Permissions: p, CheckTimeout: ag.checkTimeout, WorktreeRoot: worktreesOf(st)}
	setup := harness.Setup{BaseURL: api.baseURL, APIKey: api.apiKey, Paced: paced}
	var rec *recorder
	if ag.record {
		rec = &recorder{st: st}
		d.Gateway = rec.gateway
		setup.Transport = rec.transport
	}
	d.Harnesses = backends(setup, true)
	if rec != nil {
		rec.agents = d.Harnesses
	}
	d.Places = places(st, d.Harnesses, d.WorktreeRoot)
	return d, nil
}

// places are where else than this machine forks' turns can run: a
// Docker daemon (--on docker, or docker:CONTEXT). One place is made per
// name, and kept: it holds its daemon's client and the batch images it
// made.
func places(st *store.Store, agents *harness.Registry, worktrees string) place.Places {
	var mu sync.Mutex
	made := map[string]place.Place{}
	return place.Places{docker.Kind: func(name string) (place.Place, error) {
		mu.Lock()
		defer mu.Unlock()
		if p, ok := made[name]; ok {
			return p, nil
		}
		p, err := docker.New(name, docker.Config{Store: st, Agents: agents, Environ: os.Environ(), DB: st.Path(),
			WorktreeRoot: worktrees})
		if err != nil {
			return nil, err
		}
		made[name] = p
		return p, nil
	}}
}
