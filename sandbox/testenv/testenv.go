package testenv

import (
	"os"
	"testing"
)

// Names of the environment variables that carry the service addresses.
const (
	DockerHostEnv   = "BERTH_TEST_DOCKER_HOST"
	DatabaseURLEnv  = "BERTH_TEST_DATABASE_URL"
	RuntimeImageEnv = "BERTH_TEST_RUNTIME_IMAGE"
)

// DockerHost returns the Docker Engine address for tests
// (BERTH_TEST_DOCKER_HOST). When it is not set, the test fails under CI=true
// and is skipped otherwise.
func DockerHost(t testing.TB) string {
	t.Helper()
	return require(t, DockerHostEnv, "a Docker Engine")
}

// DatabaseURL returns the PostgreSQL connection URL for tests
// (BERTH_TEST_DATABASE_URL). When it is not set, the test fails under CI=true
// and is skipped otherwise.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	return require(t, DatabaseURLEnv, "a PostgreSQL database")
}

// RuntimeImage returns the id of the runtime image built by
// scripts/build-runtime-image (BERTH_TEST_RUNTIME_IMAGE). When it is not
// set, the test fails under CI=true and is skipped otherwise.
func RuntimeImage(t testing.TB) string {
	t.Helper()
	return require(t, RuntimeImageEnv, "the Berth runtime image")
}

// InCI reports whether the tests run in CI (CI=true), where a missing test
// service is a failure instead of a skip.
func InCI() bool {
	return os.Getenv("CI") == "true"
}

func require(t testing.TB, name, what string) string {
	t.Helper()
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
