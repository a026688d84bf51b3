package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"tine/harness/place"
	"tine/model"
)

// Remove implements place.Remover: fork run's container goes, once its
// work is back as its branch (the container is started once more to save
// it, and what it saves is brought back); when that cannot be, the
// container is kept, unless force. What came back of the agent's sessions
// stays beside the database (a later turn makes the container again from
// the branch and them).
func (p *Place) Remove(ctx context.Context, run model.Run, force bool) error {
	if run.Container == "" {
		return nil
	}
	if run.Status == model.Running {
		return fmt.Errorf("%s is running in its container; cancel it first (tine cancel %s)", run.Label(), model.ShortID(run.ID))
	}
	cli, err := p.client(ctx)
	if err != nil {
		return err
	}
	if _, err := cli.ContainerInspect(ctx, run.Container, client.ContainerInspectOptions{}); errdefs.IsNotFound(err) {
		return nil // gone already
	}
	if !force {
		ag, err := p.agent(run.Harness)
		if err != nil {
			return err
		}
		if err := p.bringBack(ctx, cli, run, ag, nil); err != nil {
			return fmt.Errorf("kept container %s: %w; --force removes it anyway", shortID(run.Container), err)
		}
	}
	if _, err := cli.ContainerRemove(ctx, run.Container, client.ContainerRemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("removing container %s: %w", shortID(run.Container), err)
	}
	return nil
}

// Reap stops the containers of this tine's database that run while their
// fork's turn does not (its owner died, and the reaper failed the run),
// and returns how many. A container whose owner dies stops by itself (the
// end of its job's stdin cancels the job); this is what makes sure.
func (p *Place) Reap(ctx context.Context) (int, error) {
	cli, err := p.client(ctx)
	if err != nil {
		return 0, err
	}
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: make(client.Filters).
		Add("label", labelDB+"="+p.dbKey()).Add("label", labelRole+"=fork").Add("status", "running")})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range list.Items {
		run, err := p.cfg.Store.Run(ctx, c.Labels[labelRun])
		if err == nil && run.Status == model.Running && run.Container == c.ID {
			continue
		}
		if _, err := cli.ContainerKill(ctx, c.ID, client.ContainerKillOptions{Signal: "KILL"}); err == nil {
			n++
		}
	}
	return n, nil
}

// Collect removes what tine left on the daemon for this database that
// nothing needs: the containers of forks the store no longer holds (or
// holds with another container), the containers that made batch images
// and tried agents' images, and batch images no container is made from.
// A fork's container the store holds stays: worktree prune and rm remove
// those, once their work is back.
func (p *Place) Collect(ctx context.Context, dry bool) (place.Collected, error) {
	var out place.Collected
	cli, err := p.client(ctx)
	if err != nil {
		return out, err
	}
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelTine+"=1")})
	if err != nil {
		return out, err
	}
	used := map[string]bool{}
	var gone []string
	for _, c := range list.Items {
		role := c.Labels[labelRole]
		mine := c.Labels[labelDB] == p.dbKey()
		switch {
		case role == "fork" && mine:
			run, err := p.cfg.Store.Run(ctx, c.Labels[labelRun])
			if err == nil && run.Container == c.ID {
				used[c.ImageID] = true
				continue
			}
			gone = append(gone, c.ID)
			out.Containers = append(out.Containers, shortID(c.ID)+" (its fork is gone)")
		case (role == "prep" || role == "smoke") && time.Since(time.Unix(c.Created, 0)) > 10*time.Minute:
			gone = append(gone, c.ID)
			out.Containers = append(out.Containers, shortID(c.ID)+" (left from making an image)")
		default:
			used[c.ImageID] = true
		}
	}
	images, err := cli.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("label", labelDB+"="+p.dbKey()).Add("label", labelRole+"=batch")})
	if err != nil {
		return out, err
	}
	var unused []string
	for _, im := range images.Items {
		if !used[im.ID] {
			unused = append(unused, im.ID)
			name := shortID(strings.TrimPrefix(im.ID, "sha256:"))
			if len(im.RepoTags) > 0 {
				name = im.RepoTags[0]
			}
			out.Images = append(out.Images, name)
		}
	}
	if dry {
		return out, nil
	}
	var wg sync.WaitGroup
	errs := make([]error, len(gone))
	for i, id := range gone {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	for _, id := range unused {
		if _, err := cli.ImageRemove(ctx, id, client.ImageRemoveOptions{PruneChildren: true}); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// SessionSource implements place.SessionKeeper: fork run's session as it
// came back beside the database (Carry.Locate in what came back).
func (p *Place) SessionSource(ctx context.Context, run model.Run) (string, error) {
	ag, err := p.agent(run.Harness)
	if err != nil {
		return "", err
	}
	return ag.Carry.Locate([]string{"HOME=" + p.savedHome(run.ID)}, run.NativeID)
}
