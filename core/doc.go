// Package core is berth-core: the admin API, the Runtime gateway, node
// enrollment and connections, the lifecycle workers and the only owner of
// PostgreSQL state. core/README.md maps every resource to its logic
// package (core/<resource>), its thin admin adapter (core/<resource>admin),
// its store file and its queries.
//
// Rules: core imports sandbox, proto and runtimebootstrap; nothing imports
// core but the black-box tests. A logic package never imports an adapter
// or the admin API's messages; the store imports no other Core package;
// fenced lifecycle writes go only through store.Owner. Lifecycle decisions
// read the database clock.
package core
