// Package testenv gives tests the addresses of Berth's real test services:
// a Docker Engine and a PostgreSQL database, and the pinned microsandbox
// msb.
//
// The addresses come from environment variables that `scripts/test-services
// up` writes to .run/test-services.env and that the Makefile exports to
// `go test`:
//
//   - BERTH_TEST_DOCKER_HOST, e.g. unix:///run/berth-test/docker.sock
//   - BERTH_TEST_DATABASE_URL, e.g. postgres:///berth_test?host=/run/berth-test/pg&user=postgres
//   - BERTH_TEST_MSB, e.g. /var/cache/berth/msb/0.6.18/bin/msb
//
// The rule when a variable is missing:
//
//   - with CI=true the test fails (t.Fatalf);
//   - otherwise the test is skipped (t.Skipf).
//
// Both messages name the variable and the command that provides it.
//
// Under -short (`make test-short`) every helper skips, set or not, CI or
// not: -short is the run that needs no service, and it must stay that way
// when the services happen to be up and their variables exported.
//
// Why: a developer running `go test ./...` on a laptop without the services
// should get a quick, green run of everything else, so a skip is right
// there. In CI the acceptance and contract tests are the point of the run;
// a missing service there is a broken pipeline, and a skipped acceptance test
// would look exactly like a passing one. So CI must never silently skip
// them.
//
// Tests must take these addresses only from this package (never from
// DOCKER_HOST or other ambient settings), so that a test can never talk to
// an engine or a database it was not given.
package testenv
