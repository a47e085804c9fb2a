package stack

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
)

// coreSiteFlags are the berth-core serve flags every installation sets
// for itself (where it listens, where its state lives, the URL it
// announces, whether it migrates): naming them is not tuning.
var coreSiteFlags = map[string]bool{
	"migrate": true, "public-url": true, "state-dir": true,
	"admin-listen": true, "listen": true, "runtime-listen": true,
}

// coreBoolFlags are berth-core serve's flags that take no value.
var coreBoolFlags = map[string]bool{"migrate": true, "runtime-insecure": true}

// nodeSiteKeys are the node agent configuration's keys every host sets
// for itself (its state directory, address, engine and image).
var nodeSiteKeys = map[string]bool{
	"state_dir": true, "listen": true, "provider": true, "node": true, "metrics_listen": true,
}

// ServeArgs is the argv Core runs with after `serve`, in order.
func (c *Core) ServeArgs() []string { return slices.Clone(c.Cmd.Args[2:]) }

// CoreTuning is the flags of berth-core serve argv args that differ from
// its defaults ("--name value", in order): every flag but the ones each
// installation sets for itself (coreSiteFlags). Empty means Core runs at
// its defaults. A benchmark's report prints it, so that a figure taken
// away from the defaults says so.
func CoreTuning(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		name, value, inline := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !inline && !coreBoolFlags[name] && i+1 < len(args) {
			i++
			value = args[i]
		}
		if coreSiteFlags[name] {
			continue
		}
		if value == "" {
			out = append(out, "--"+name)
			continue
		}
		out = append(out, "--"+name+" "+value)
	}
	return out
}

// Tuning is the node's configuration keys that differ from the agent's
// defaults ("key=value", sorted): every key but the ones each host sets
// for itself (nodeSiteKeys), and capacity only when it is not the
// default (an empty section).
func (n *Node) Tuning() []string {
	n.t.Helper()
	data, err := os.ReadFile(n.Config)
	if err != nil {
		n.t.Fatal(err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(data, &cfg); err != nil {
		n.t.Fatal(err)
	}
	var out []string
	for k, v := range cfg {
		if nodeSiteKeys[k] || (k == "capacity" && string(v) == "{}") {
			continue
		}
		out = append(out, k+"="+string(v))
	}
	sort.Strings(out)
	return out
}

// Settings says, for a benchmark's report, how Core and the node agents
// ran: the flags and keys that differ from their defaults (or that they
// run at them) and whether the Runtime gateway serves TLS; atDefaults
// reports that nothing differs and the gateway, if any, serves TLS, which
// a benchmark requires. Without nodes it says nothing of node agents (a
// simulator names its own).
func Settings(core *Core, nodes ...*Node) (text string, atDefaults bool) {
	args := core.ServeArgs()
	gateway := "no Runtime gateway"
	if slices.Contains(args, "--runtime-listen") {
		gateway = "Runtime gateway over TLS from the installation CA"
		if slices.Contains(args, "--runtime-insecure") {
			gateway = "Runtime gateway in plaintext"
		}
	}
	tuning := CoreTuning(args)
	core1 := "berth-core serve at its defaults (no flag but addresses and paths)"
	if len(tuning) > 0 {
		core1 = "berth-core serve with " + strings.Join(tuning, " ")
	}
	var keys []string
	for _, n := range nodes {
		for _, k := range n.Tuning() {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	atDefaults = len(tuning) == 0 && len(keys) == 0 && !slices.Contains(args, "--runtime-insecure")
	out := fmt.Sprintf("%s; %s", core1, gateway)
	switch {
	case len(nodes) > 0 && len(keys) == 0:
		out += "; berth-nodeagent at its defaults (no configuration key but addresses, paths and its engine)"
	case len(nodes) > 0:
		out += "; berth-nodeagent with " + strings.Join(keys, " ")
	}
	return out, atDefaults
}
