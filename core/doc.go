// Package core is berth-core: the admin API, runtime gateway, node
// connections, lifecycle workers and the only owner of PostgreSQL state.
//
// Rules: core imports sandbox, proto and runtimebootstrap; nothing imports
// core. Lifecycle decisions read the database clock.
package core
