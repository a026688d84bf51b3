package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

const (
	helperDBEnv  = "TINE_STORE_HELPER_DB"
	helperTagEnv = "TINE_STORE_HELPER_TAG"
	writesEach   = 200
)

// writeMany does writesEach writes of every kind, returning the first error.
func writeMany(ctx context.Context, s *Store, tag string) error {
	root := model.Run{Name: tag + "-root"}
	if err := s.CreateRun(ctx, &root, conversation(4, tag)); err != nil {
		return err
	}
	for i := 1; i < writesEach; i++ {
		var err error
		switch i % 5 {
		case 0:
			r := model.Run{Title: fmt.Sprintf("%s %d", tag, i)}
			err = s.CreateRun(ctx, &r, conversation(2, tag))
		case 1:
			err = s.AppendMessages(ctx, root.ID, conversation(2, tag))
		case 2:
			err = s.CreateForks(ctx, []*model.Run{{ParentID: root.ID, ForkAt: 2}, {ParentID: root.ID, ForkAt: 4}})
		case 3:
			// Not running: a run mid-turn gets no forks (case 2).
			err = s.SetStatus(ctx, root.ID, model.Completed, "")
		case 4:
			err = s.AddCost(ctx, root.ID, 0.01)
		}
		if err != nil {
			return fmt.Errorf("%s write %d: %w", tag, i, err)
		}
		// Reads interleave with the other writer too.
		if i%20 == 0 {
			if _, _, err := s.Messages(ctx, root.ID); err != nil {
				return fmt.Errorf("%s read %d: %w", tag, i, err)
			}
		}
	}
	return nil
}

// runsPerWriter is how many runs writeMany creates.
func runsPerWriter() int {
	n := 1
	for i := 1; i < writesEach; i++ {
		switch i % 5 {
		case 0:
			n++
		case 2:
			n += 2
		}
	}
	return n
}

func TestConcurrentStores(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tine.db")
	var stores [2]*Store
	for i := range stores {
		s, err := Open(path)
		require.NoError(t, err)
		defer s.Close()
		stores[i] = s
	}

	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i, s := range stores {
		wg.Go(func() { errs[i] = writeMany(ctx, s, fmt.Sprintf("g%d", i)) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, 2*runsPerWriter(), count(t, stores[0], "runs"))
}

func TestConcurrentGoroutinesOneStore(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = writeMany(ctx, s, fmt.Sprintf("g%d", i)) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, 4*runsPerWriter(), count(t, s, "runs"))
}

// TestHelperWriter is the body of a writer process started by
// TestConcurrentProcesses; run directly it does nothing.
func TestHelperWriter(t *testing.T) {
	path := os.Getenv(helperDBEnv)
	if path == "" {
		t.Skip("runs only as a helper process")
	}
	tag := os.Getenv(helperTagEnv)
	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	// Say we are ready, then wait for the go, so the writers overlap
	// rather than one finishing before the other has started.
	require.NoError(t, os.WriteFile(path+".ready-"+tag, nil, 0o600))
	waitFor(t, path+".go")
	require.NoError(t, writeMany(context.Background(), s, tag))
}

func waitFor(t *testing.T, file string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(file); err == nil {
			return
		}
		require.True(t, time.Now().Before(deadline), "timed out waiting for %s", file)
		time.Sleep(time.Millisecond)
	}
}

func TestConcurrentProcesses(t *testing.T) {
	if os.Getenv(helperDBEnv) != "" {
		t.Skip("already a helper")
	}
	// Both processes also race to create and migrate the fresh file.
	path := filepath.Join(t.TempDir(), "shared", "tine.db")
	const procs = 2
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for i := range cmds {
		outs[i] = &bytes.Buffer{}
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), helperDBEnv+"="+path, helperTagEnv+"=p"+strconv.Itoa(i))
		cmd.Stdout, cmd.Stderr = outs[i], outs[i] // one writer: exec serializes its writes
		cmds[i] = cmd
	}
	errs := make([]error, procs)
	done := make([]chan struct{}, procs)
	for i, cmd := range cmds {
		require.NoError(t, cmd.Start())
		done[i] = make(chan struct{})
		go func() { errs[i] = cmd.Wait(); close(done[i]) }()
	}
	t.Cleanup(func() {
		for i, cmd := range cmds {
			select {
			case <-done[i]:
			default:
				cmd.Process.Kill() // a failed test must not leave a helper waiting
				<-done[i]
			}
		}
	})
	// Wait until both have opened the file, then let them write together.
	for i := range cmds {
		ready := path + ".ready-p" + strconv.Itoa(i)
		for {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			select {
			case <-done[i]:
				require.FailNow(t, "helper exited before it was ready", "process %d: %v\n%s", i, errs[i], outs[i])
			case <-time.After(time.Millisecond):
			}
		}
	}
	require.NoError(t, os.WriteFile(path+".go", nil, 0o600))
	for i := range cmds {
		<-done[i]
		require.NoError(t, errs[i], "process %d:\n%s", i, outs[i])
		require.Contains(t, outs[i].String(), "--- PASS: TestHelperWriter", "the helper must have run")
	}

	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, procs*runsPerWriter(), count(t, s, "runs"))
	trees, err := s.Trees(context.Background())
	require.NoError(t, err)
	assert.Len(t, trees, procs*(1+(writesEach-1)/5))
}
