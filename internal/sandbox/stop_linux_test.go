package sandbox_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tine/internal/agentproc"
	"tine/internal/sandbox"
)

// sleepers are the processes running `sleep N` for N in ns.
func sleepers(ns ...string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, n := range ns {
			if string(b) == "sleep\x00"+n+"\x00" {
				found = append(found, e.Name()+" sleep "+n)
			}
		}
	}
	return found
}

// TestCancelStopsTheWholeJail: an agent started by agentproc in a jail is
// stopped as any agent is, and whatever it left running in the jail goes
// with it, even a child that left its process group (setsid): what the
// jail's pid namespace still holds dies with it.
func TestCancelStopsTheWholeJail(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, "gw.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	jail := &sandbox.Spec{Writable: []string{dir}, Socket: ln.Addr().String(), Port: 47124}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	running := 0
	_, err = agentproc.Run(ctx, agentproc.Spec{Name: "jailed", Bin: "/bin/sh", Dir: dir, Grace: 500 * time.Millisecond, Sandbox: jail,
		Args: []string{"-c", `setsid sleep 317 & echo '{"ready":true}'; exec sleep 318`}},
		func(line []byte) error {
			if strings.Contains(string(line), "ready") {
				// Both run, in the jail, before the agent is stopped.
				for end := time.Now().Add(5 * time.Second); len(sleepers("317", "318")) < 2 && time.Now().Before(end); {
					time.Sleep(10 * time.Millisecond)
				}
				running = len(sleepers("317", "318"))
				cancel()
			}
			return nil
		})
	if err != context.Canceled {
		t.Fatalf("Run: %v", err)
	}
	if running != 2 {
		t.Fatalf("%d of the jail's two sleeps ran", running)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stopped after %v", d)
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(sleepers("317", "318")) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := sleepers("317", "318"); len(left) > 0 {
		t.Errorf("left running: %v", left)
	}
}
