// Package runtime holds the end-to-end tests of Sessions that run Turns:
// real berth-core (with its Runtime gateway), a real berth-nodeagent, the
// real Docker Engine and berth-runtime inside each container.
package runtime
