package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"berth.dev/sandbox/docker/internal/seccompprofile"
)

func main() {
	out := flag.String("out", "", "directory to write the profile files into")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: seccompgen -out DIR")
		os.Exit(2)
	}
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "seccompgen:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	profile, err := seccompprofile.Build()
	if err != nil {
		return fmt.Errorf("build profile: %w", err)
	}
	mod, err := upstreamModule()
	if err != nil {
		return err
	}
	license, err := os.ReadFile(filepath.Join(mod.Dir, "LICENSE"))
	if err != nil {
		return fmt.Errorf("read upstream license: %w", err)
	}
	header := seccompprofile.LicenseHeader(mod.Version) + "\n\n"

	files := []struct {
		name string
		data []byte
	}{
		{seccompprofile.FileName, profile},
		{seccompprofile.FileName + ".sha256", seccompprofile.SumFile(profile)},
		{"seccomp.LICENSE", append([]byte(header), license...)},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(out, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

type module struct {
	Version string
	Dir     string
}

// upstreamModule asks the go command which version of the upstream module
// the build selects and where its files are.
func upstreamModule() (module, error) {
	cmd := exec.Command("go", "list", "-m", "-json", seccompprofile.UpstreamModule)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return module{}, fmt.Errorf("go list -m %s: %w", seccompprofile.UpstreamModule, err)
	}
	var m module
	if err := json.Unmarshal(b, &m); err != nil {
		return module{}, fmt.Errorf("go list -m %s: %w", seccompprofile.UpstreamModule, err)
	}
	if m.Version == "" || m.Dir == "" {
		return module{}, fmt.Errorf("go list -m %s: no version or directory (is it downloaded?)", seccompprofile.UpstreamModule)
	}
	return m, nil
}
