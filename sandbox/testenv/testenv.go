package testenv

import (
	"os"
	"strconv"
	"testing"
)

// Names of the environment variables that carry the service addresses.
const (
	DockerHostEnv   = "BERTH_TEST_DOCKER_HOST"
	DatabaseURLEnv  = "BERTH_TEST_DATABASE_URL"
	RuntimeImageEnv = "BERTH_TEST_RUNTIME_IMAGE"
	MSBEnv          = "BERTH_TEST_MSB"
)

// DockerHost returns the Docker Engine address for tests
// (BERTH_TEST_DOCKER_HOST). Under -short the test is skipped; when the
// variable is not set, the test fails under CI=true and is skipped otherwise.
func DockerHost(t testing.TB) string {
	t.Helper()
	return require(t, DockerHostEnv, "a Docker Engine")
}

// DatabaseURL returns the PostgreSQL connection URL for tests
// (BERTH_TEST_DATABASE_URL). Under -short the test is skipped; when the
// variable is not set, the test fails under CI=true and is skipped otherwise.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	return require(t, DatabaseURLEnv, "a PostgreSQL database")
}

// RuntimeImage returns the id of the runtime image built by
// scripts/build-runtime-image (BERTH_TEST_RUNTIME_IMAGE). Under -short the
// test is skipped; when the variable is not set, the test fails under
// CI=true and is skipped otherwise.
func RuntimeImage(t testing.TB) string {
	t.Helper()
	return require(t, RuntimeImageEnv, "the Berth runtime image")
}

// MSB returns the absolute path of the pinned msb executable (with
// libkrunfw beside it, ../lib) that scripts/test-services installs
// (BERTH_TEST_MSB). Under -short the test is skipped; when the variable is
// not set, the test fails under CI=true and is skipped otherwise.
func MSB(t testing.TB) string {
	t.Helper()
	return require(t, MSBEnv, "the pinned microsandbox msb")
}

// InCI reports whether the tests run in CI (CI set to any true value
// strconv.ParseBool accepts: true, 1, TRUE, ...), where a missing test
// service is a failure instead of a skip. CI systems set CI=true or CI=1;
// treating only "true" as CI let a CI=1 run pass by skipping.
func InCI() bool {
	ci, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && ci
}

// SkipShort skips the test under -short, naming what it needs. The helpers
// of this package do the same; a test that needs a service it does not get
// from them (a private engine or database it starts itself) calls it first.
func SkipShort(t testing.TB, what string) {
	t.Helper()
	if short() {
		t.Skipf("-short: skipping, this test needs %s; run it without -short (make test)", what)
	}
}

// Unavailable ends a test whose host lacks what it needs (why): a skip on
// a developer machine, a failure under CI=true, where a skipped test would
// look like a passing one.
func Unavailable(t testing.TB, why string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s, and CI=true forbids skipping this test", why)
		return
	}
	t.Skipf("%s: skipping", why)
}

// short is testing.Short, a variable so that this package's own tests can
// run both ways.
var short = testing.Short

func require(t testing.TB, name, what string) string {
	t.Helper()
	if short() {
		SkipShort(t, what+" ("+name+")")
		return "" // reached only when t.Skipf returns (a recording testing.TB)
	}
	if v := os.Getenv(name); v != "" {
		return v
	}
	const hint = "run `scripts/test-services up` (or `make services`) and run the tests through make, or export the variables from .run/test-services.env"
	if InCI() {
		t.Fatalf("%s is not set: this test needs %s and CI=true forbids skipping it; %s", name, what, hint)
		return ""
	}
	t.Skipf("%s is not set: skipping, this test needs %s; %s", name, what, hint)
	return ""
}
