package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records Fatalf and Skipf instead of stopping.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

func (r *recorder) Skipf(format string, args ...any) { r.skip = fmt.Sprintf(format, args...) }

// setShort makes the helpers see -short as on for the rest of the test.
func setShort(t *testing.T, on bool) {
	saved := short
	short = func() bool { return on }
	t.Cleanup(func() { short = saved })
}

func TestPresent(t *testing.T) {
	setShort(t, false)
	t.Setenv(DockerHostEnv, "unix:///tmp/x.sock")
	t.Setenv(DatabaseURLEnv, "postgres:///db")
	r := &recorder{TB: t}
	if got := DockerHost(r); got != "unix:///tmp/x.sock" {
		t.Errorf("DockerHost = %q", got)
	}
	if got := DatabaseURL(r); got != "postgres:///db" {
		t.Errorf("DatabaseURL = %q", got)
	}
	if r.fatal != "" || r.skip != "" {
		t.Errorf("unexpected fatal %q / skip %q", r.fatal, r.skip)
	}
}

func TestMissing(t *testing.T) {
	for _, ci := range []string{"true", ""} {
		for name, get := range map[string]func(testing.TB) string{
			DockerHostEnv:  DockerHost,
			DatabaseURLEnv: DatabaseURL,
			MSBEnv:         MSB,
		} {
			t.Run(name+"/CI="+ci, func(t *testing.T) {
				setShort(t, false)
				t.Setenv("CI", ci)
				t.Setenv(name, "")
				r := &recorder{TB: t}
				get(r)
				msg := r.skip
				if ci == "true" {
					msg = r.fatal
					if r.skip != "" {
						t.Errorf("skipped under CI=true: %q", r.skip)
					}
				} else if r.fatal != "" {
					t.Errorf("failed outside CI: %q", r.fatal)
				}
				for _, want := range []string{name, "scripts/test-services up"} {
					if !strings.Contains(msg, want) {
						t.Errorf("message %q does not name %q", msg, want)
					}
				}
			})
		}
	}
}

// TestShort: under -short every helper skips, whether its variable is set
// or not and even under CI=true, so that `make test-short` never reaches a
// service.
func TestShort(t *testing.T) {
	for _, set := range []bool{true, false} {
		for name, get := range map[string]func(testing.TB) string{
			DockerHostEnv:   DockerHost,
			DatabaseURLEnv:  DatabaseURL,
			RuntimeImageEnv: RuntimeImage,
			MSBEnv:          MSB,
		} {
			t.Run(fmt.Sprintf("%s/set=%v", name, set), func(t *testing.T) {
				setShort(t, true)
				t.Setenv("CI", "true")
				t.Setenv(name, "")
				if set {
					t.Setenv(name, "some-service")
				}
				r := &recorder{TB: t}
				if got := get(r); got != "" {
					t.Errorf("returned %q under -short", got)
				}
				if r.fatal != "" {
					t.Errorf("failed under -short: %q", r.fatal)
				}
				for _, want := range []string{"-short", name} {
					if !strings.Contains(r.skip, want) {
						t.Errorf("skip message %q does not name %q", r.skip, want)
					}
				}
			})
		}
	}
	r := &recorder{TB: t}
	setShort(t, true)
	SkipShort(r, "a private PostgreSQL")
	if !strings.Contains(r.skip, "-short") || !strings.Contains(r.skip, "a private PostgreSQL") {
		t.Errorf("SkipShort message %q", r.skip)
	}
	setShort(t, false)
	r = &recorder{TB: t}
	SkipShort(r, "a private PostgreSQL")
	if r.skip != "" {
		t.Errorf("SkipShort skipped without -short: %q", r.skip)
	}
}

// TestUnavailable: a host that lacks what a test needs skips it on a
// developer machine and fails it under CI=true.
func TestUnavailable(t *testing.T) {
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		Unavailable(r, "no /dev/shm here")
		if ci == "true" && (r.fatal == "" || r.skip != "") {
			t.Errorf("CI=true: fatal %q, skip %q", r.fatal, r.skip)
		}
		if ci == "" && (r.skip == "" || r.fatal != "") {
			t.Errorf("outside CI: fatal %q, skip %q", r.fatal, r.skip)
		}
	}
}

// TestInCIAcceptsEveryTrueValue: CI=1 is CI as much as CI=true (issue 27,
// item 8); an unset, false or unparsable CI is not.
func TestInCIAcceptsEveryTrueValue(t *testing.T) {
	for v, want := range map[string]bool{
		"true": true, "1": true, "TRUE": true, "True": true, "t": true,
		"": false, "false": false, "0": false, "no": false, "yes please": false,
	} {
		t.Setenv("CI", v)
		if got := InCI(); got != want {
			t.Errorf("CI=%q: InCI() = %v, want %v", v, got, want)
		}
	}
	t.Setenv("CI", "1")
	setShort(t, false)
	t.Setenv(DockerHostEnv, "")
	r := &recorder{TB: t}
	DockerHost(r)
	if r.fatal == "" || r.skip != "" {
		t.Errorf("a missing service under CI=1: fatal %q, skip %q; want a failure", r.fatal, r.skip)
	}
}
