// Package projects is the black-box proof that project keys isolate
// projects (issue 31, item 2 and its "Done when"): a real berth-core with
// its Runtime gateway and two real berth-nodeagent processes over the test
// engine, two tenants' projects A and B each with a key created through
// the admin API, and every method of the admin API's Session, Turn and
// Allocation services (listed by reflection from the registered service
// descriptors, so a method added later is tried too or fails the test)
// called with A's key and B's names. Each answer must be the fixed refusal
// of its method (NOT_FOUND for a key's methods, PERMISSION_DENIED for the
// administrator's) and identical, code, message and details, to the answer
// for names that never existed. B's Sessions, Turns and output are read
// back unchanged with the administrator's token; each project's containers
// carry their own tenant on the engine; revoking A's key ends its open
// output stream and refuses its next call while B's key works on; no key
// token reaches Core's or the node agents' logs; and the engine holds
// nothing of the test's Sessions once they are deleted.
//
// limits_test.go proves project limits (item 3): 50 concurrent
// CreateSession calls across three projects, one through the administrator
// token and two through their projects' keys, hold every project within
// its limit, each refusal explained by the counts, the others served.
package projects
