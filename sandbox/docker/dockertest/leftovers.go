package dockertest

import (
	"context"
	"fmt"
	"slices"

	"github.com/moby/moby/client"

	"berth.dev/sandbox/docker"
)

// Leftovers lists, from a real engine, every container (running or not)
// and volume labelled with one of installations, tombstones included: what
// a test suite left behind. The suites' end-of-run checks (the Docker
// adapter's acceptance tests, the black-box suites' stack.Run) fail on any.
func Leftovers(ctx context.Context, cli *client.Client, installations []string) ([]string, error) {
	if len(installations) == 0 {
		return nil, nil
	}
	f := client.Filters{}.Add("label", docker.LabelInstallation)
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list the engine's containers: %w", err)
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list the engine's volumes: %w", err)
	}
	var left []string
	for _, c := range cs.Items {
		if slices.Contains(installations, c.Labels[docker.LabelInstallation]) {
			left = append(left, fmt.Sprintf("container %v (labels %v)", c.Names, c.Labels))
		}
	}
	for _, v := range vs.Items {
		if slices.Contains(installations, v.Labels[docker.LabelInstallation]) {
			left = append(left, fmt.Sprintf("volume %s (labels %v)", v.Name, v.Labels))
		}
	}
	return left, nil
}
