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

func TestPresent(t *testing.T) {
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
		} {
			t.Run(name+"/CI="+ci, func(t *testing.T) {
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
