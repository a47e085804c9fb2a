// Package reset is the black-box proof of the deployment reset (issue
// 31, item 5 and its "Done when"): a real berth-core with its Runtime
// gateway and two real berth-nodeagent processes over the test engine,
// Sessions on both nodes with running Turns, and a reset started through
// the admin API while one node's agent is frozen and then killed, so that
// node goes offline mid-reset holding its Sessions' containers. The reset
// archives every Session, the live node cleans up, and the reset waits,
// draining with the offline node's resources held, past the 45-second
// presence window; it completes only after the agent returns and cleans
// up. Then the engine holds nothing of the installation, the deployment
// has no current generation and its nodes are retired, a new commit above
// the empty generation serves a new Session, and the audit trail shows
// reset.start, one session.archive per Session under the reset,
// node.retire and reset.finish, in order. A second reset whose deadline
// passes with a node down ends failed (reset_deadline_passed) and
// reopens admission with the committed deployment unchanged.
package reset
