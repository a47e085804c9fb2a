// Command berth-nodeagent serves the node protocol on one compute host.
//
//	berth-nodeagent enroll --config /etc/berth/nodeagent.json --core core.example:8443 \
//	    --token-file /root/enroll.token --advertise node1.example:7443
//	berth-nodeagent serve --config /etc/berth/nodeagent.json
//	berth-nodeagent version
//
// Rules:
//   - The enrollment token is read from a file (or "-" for standard
//     input), never from the command line, so it never appears in argv.
//   - Every default (the configuration file, the health interval, the
//     timeouts) comes from nodeagent's defaults.go; main only parses flags
//     and calls package nodeagent.
//   - It imports nodeagent, the node protocol's version (proto) and
//     platform/otelsetup; never Core.
package main
