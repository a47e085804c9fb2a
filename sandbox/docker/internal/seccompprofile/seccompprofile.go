package seccompprofile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// UpstreamModule is the Go module whose DefaultProfile is the base profile.
const UpstreamModule = "github.com/moby/profiles/seccomp"

// FileName is the name of the profile in deploy/runtime and on every node.
const FileName = "seccomp.json"

// appendedSyscalls are allowed unconditionally by the one appended rule.
var appendedSyscalls = []string{"clone", "unshare", "setns", "mount", "umount2", "pivot_root"}

// AppendedSyscalls returns the syscalls of the appended rule, in order.
func AppendedSyscalls() []string { return slices.Clone(appendedSyscalls) }

// Build returns the profile as deterministic JSON: the marshalled form of
// seccomp.DefaultProfile (the format of Moby's default.json, which the
// Docker Engine accepts in --security-opt seccomp=<file>) with the appended
// rule last, tab-indented, with a trailing newline.
//
// The bytes depend only on the module version: the default profile is
// static data, and encoding/json writes struct fields in declaration order.
// (The errno numbers in it are the build target's; they are equal on every
// Linux architecture Berth builds for.)
func Build() ([]byte, error) {
	p := seccomp.DefaultProfile()
	p.Syscalls = append(p.Syscalls, &seccomp.Syscall{
		LinuxSyscall: specs.LinuxSyscall{
			Names:  AppendedSyscalls(),
			Action: specs.ActAllow,
		},
	})
	b, err := json.MarshalIndent(p, "", "\t")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Digest returns the hex SHA-256 of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// SumFile returns the content of seccomp.json.sha256 for profile: one line
// in sha256sum's format, so `sha256sum -c seccomp.json.sha256` verifies it.
func SumFile(profile []byte) []byte {
	return []byte(Digest(profile) + "  " + FileName + "\n")
}

// LicenseHeader is the first line of seccomp.LICENSE, naming the module
// version the profile was generated from; the module's LICENSE follows it.
func LicenseHeader(version string) string {
	return FileName + " is generated from " + UpstreamModule + " " + version +
		" (DefaultProfile plus one appended rule); that module's license follows."
}
