package stack

import (
	"context"
	"testing"

	"github.com/moby/moby/client"
)

// BridgeGateway returns the engine's default bridge gateway address, where
// containers on the bridge network reach this host (and so Core's Runtime
// gateway).
func BridgeGateway(t testing.TB, cli *client.Client) string {
	t.Helper()
	res, err := cli.NetworkInspect(context.Background(), "bridge", client.NetworkInspectOptions{})
	if err != nil {
		t.Fatalf("inspect bridge network: %v", err)
	}
	for _, c := range res.Network.IPAM.Config {
		if c.Gateway.Is4() {
			return c.Gateway.String()
		}
	}
	t.Fatal("the bridge network has no IPv4 gateway")
	return ""
}

// RuntimeGateway picks a free port on the engine's bridge gateway and
// returns Core options that serve the Runtime gateway there (with a 2 s
// keepalive unless Defaults is set), with the public URL naming it, and the
// gateway's host:port. Node agents must use the "bridge" network for their
// containers to reach it.
func RuntimeGateway(t testing.TB, cli *client.Client) (CoreOptions, string) {
	t.Helper()
	addr := FreeAddrOn(t, BridgeGateway(t, cli))
	return CoreOptions{PublicURL: "http://" + addr, RuntimeListen: addr}, addr
}
