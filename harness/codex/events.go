package codex

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"time"

	"tine/model"
)

// userMessage reads an event_msg user_message: the prompt a person typed,
// as Codex shows it. Codex writes the prompt as a user response item too,
// but not always: 0.128 driven from an IDE, and 0.129 with skills, wrote
// only the event. So the event is the prompt when no item holds it: an
// item and an event since the model last answered pair up, one for one,
// whichever comes first, and each prompt is a message once. Events that
// repeat context Codex injected (older versions said so in kind) are not
// prompts.
func (p *parser) userMessage(pl []byte) {
	it, ok := object(pl)
	if !ok {
		return
	}
	var text, kind string
	var images, local []byte
	for k, v := range it.Members() {
		switch string(k) {
		case "message":
			text = str(v)
		case "kind":
			kind = str(v)
		case "images":
			images = v
		case "local_images":
			local = v
		}
	}
	if kind != "" && kind != "plain" {
		return
	}
	var parts []model.Part
	if text != "" {
		parts = append(parts, model.Part{Kind: model.Text, Text: text})
	}
	if arr, ok := array(images); ok {
		for e := range arr.Elements() {
			if str(e) != "" {
				parts = append(parts, model.Part{Kind: model.Image, Raw: `{"type":"input_image","image_url":` + rawText(e) + `}`})
			}
		}
	}
	if arr, ok := array(local); ok {
		for e := range arr.Elements() {
			if str(e) != "" {
				parts = append(parts, model.Part{Kind: model.Image, Raw: `{"type":"local_image","path":` + rawText(e) + `}`})
			}
		}
	}
	if len(parts) == 0 || injected(parts, nil) {
		return
	}
	if p.itemPrompts > 0 {
		p.itemPrompts-- // its item came first and holds it
		return
	}
	p.eventPrompts++
	p.add(model.User, parts...)
}

// collabEnd reads the end of a collaboration tool's call (spawn_agent,
// wait_agent, send_input, close_agent, resume_agent): Codex answers those
// calls with these events, carrying the call's id, and writes no
// function_call_output for them. The event is the call's result, so the
// call is answered and the cuts after it are safe (rule 1 in
// ARCHITECTURE.md).
func (p *parser) collabEnd(typ string, pl []byte) {
	it, ok := object(pl)
	if !ok {
		return
	}
	var id, thread, receiver string
	var status, statuses, agents []byte
	for k, v := range it.Members() {
		switch string(k) {
		case "call_id":
			id = str(v)
		case "new_thread_id":
			thread = str(v)
		case "receiver_thread_id":
			receiver = str(v)
		case "status":
			status = v
		case "statuses":
			statuses = v
		case "agent_statuses":
			agents = v
		}
	}
	tool, known := p.toolNames[id]
	if id == "" || !known || p.answered[id] {
		return
	}
	st, failed := agentStatus(status)
	var text string
	switch typ {
	case "collab_agent_spawn_end":
		if thread == "" {
			text, failed = "no agent was spawned ("+st+")", true
		} else {
			text = "spawned agent " + thread + " (" + st + ")"
		}
	case "collab_waiting_end":
		text = waitedFor(statuses, agents)
	case "collab_agent_interaction_end":
		text = "sent to agent " + receiver + " (" + st + ")"
	case "collab_close_end":
		text = "closed agent " + receiver + " (" + st + ")"
	case "collab_resume_end":
		text = "resumed agent " + receiver + " (" + st + ")"
	}
	p.answered[id] = true
	p.add(model.Tool, model.Part{Kind: model.ToolResult, ToolCallID: id, ToolName: tool, Text: text, IsError: failed})
	p.byCollab[id] = len(p.msgs) - 1
}

// agentStatus says an AgentStatus ("running", {"completed": "its last
// message"}, {"errored": "why"}, "not_found", ...), and whether it is a
// failure.
func agentStatus(v []byte) (string, bool) {
	failure := func(s string) bool { return s == "errored" || s == "not_found" }
	if s := str(v); s != "" {
		return s, failure(s)
	}
	if obj, ok := object(v); ok {
		for k, v := range obj.Members() {
			key := string(k)
			if s := str(v); s != "" {
				return key + ": " + s, failure(key)
			}
			return key, failure(key)
		}
	}
	if len(v) == 0 {
		return "unknown", false
	}
	return rawText(v), false
}

// waitedFor says what wait_agent found: each agent's status, from the
// statuses map (thread id -> status), or the agent_statuses list.
func waitedFor(statuses, agents []byte) string {
	var lines []string
	if obj, ok := object(statuses); ok {
		for k, v := range obj.Members() {
			st, _ := agentStatus(v)
			lines = append(lines, string(k)+": "+st)
		}
	}
	if arr, ok := array(agents); ok && len(lines) == 0 {
		for e := range arr.Elements() {
			obj, ok := object(e)
			if !ok {
				continue
			}
			var thread string
			var status []byte
			for k, v := range obj.Members() {
				switch string(k) {
				case "thread_id":
					thread = str(v)
				case "status":
					status = v
				}
			}
			st, _ := agentStatus(status)
			lines = append(lines, thread+": "+st)
		}
	}
	if len(lines) == 0 {
		return "waited for no agent"
	}
	return strings.Join(lines, "\n")
}

// spawnedBy reads a session_meta's source: the parent thread of a thread
// a spawn_agent call started ({"subagent": {"thread_spawn":
// {"parent_thread_id": ...}}}), "" for any other source.
func spawnedBy(source []byte) string {
	obj, ok := object(source)
	if !ok {
		return ""
	}
	for k, v := range obj.Members() {
		if !strings.EqualFold(string(k), "subagent") {
			continue
		}
		sub, ok := object(v)
		if !ok {
			return ""
		}
		for k, v := range sub.Members() {
			if string(k) != "thread_spawn" && string(k) != "threadSpawn" {
				continue
			}
			spawn, _ := object(v)
			for k, v := range spawn.Members() {
				if string(k) == "parent_thread_id" {
					return str(v)
				}
			}
		}
	}
	return ""
}

// spawningCall finds, in the rollout of thread parent next to the
// rollout at path (its day's folder, or the sessions folder's day of the
// parent's uuid v7), the spawn_agent call whose collab_agent_spawn_end
// names thread child; "" when the parent's rollout is not there or does
// not name it.
func spawningCall(path, parent, child string) string {
	if parent == "" || child == "" || strings.ContainsAny(parent, `*?[]/\`) {
		return ""
	}
	if _, err := os.Stat(path); err != nil {
		return "" // a name, not a file on disk
	}
	name := "rollout-*-" + parent + ".jsonl"
	patterns := []string{filepath.Join(filepath.Dir(path), name)}
	if roots := sessionRoots("", path); len(roots) > 2 {
		if t, ok := uuidTime(parent); ok {
			for _, d := range []time.Duration{0, -24 * time.Hour, 24 * time.Hour} {
				day := t.Add(d).Local().Format("2006/01/02")
				patterns = append(patterns, filepath.Join(roots[1], filepath.FromSlash(day), name))
			}
		}
	}
	for _, pat := range patterns {
		matches, _ := filepath.Glob(pat)
		for _, m := range matches {
			if id := spawnCallIn(m, child); id != "" {
				return id
			}
		}
	}
	return ""
}

// spawnCallIn is the call id of the collab_agent_spawn_end in the rollout
// at path that names thread child.
func spawnCallIn(path, child string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	mark, id := []byte("collab_agent_spawn_end"), []byte(child)
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line (a tool's big output): not the event, which is small.
			for err == bufio.ErrBufferFull {
				_, err = r.ReadSlice('\n')
			}
			continue
		}
		if bytes.Contains(line, mark) && bytes.Contains(line, id) {
			if call := spawnEnd(line, child); call != "" {
				return call
			}
		}
		if err != nil {
			return ""
		}
	}
}

// spawnEnd is the call id of line when it is a collab_agent_spawn_end
// naming thread child.
func spawnEnd(line []byte, child string) string {
	it := objectLine(bytes.TrimSpace(line))
	var payload []byte
	for k, v := range it.Members() {
		if string(k) == "payload" {
			payload = v
		}
	}
	pl, ok := object(payload)
	if !ok {
		return ""
	}
	var typ, call, thread string
	for k, v := range pl.Members() {
		switch string(k) {
		case "type":
			typ = str(v)
		case "call_id":
			call = str(v)
		case "new_thread_id":
			thread = str(v)
		}
	}
	if typ == "collab_agent_spawn_end" && thread == child {
		return call
	}
	return ""
}
