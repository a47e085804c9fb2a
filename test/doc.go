// Package test holds Berth's black-box tests over real processes and real
// services (Docker Engine, PostgreSQL). It is its own module so that nothing
// in production code can import it.
package test
