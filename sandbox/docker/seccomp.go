package docker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"berth.dev/sandbox/docker/internal/seccompprofile"
	"berth.dev/sandbox/errdefs"
)

// SeccompProfileSHA256 is the hex SHA-256 digest of the shipped
// deploy/runtime/seccomp.json (guide: "Seccomp profile"). Nodes refuse any
// other profile: LoadSeccompProfile accepts only a file with this digest.
// `make generate` rewrites the file; update this constant in the same change.
const SeccompProfileSHA256 = "ec9b8be82d26bdcff848886565ea2b811f25571aefdf97584084420d534e16ae"

// seccompProfileMaxBytes bounds how much of a profile file is read; the
// shipped profile is about 14 KiB.
const seccompProfileMaxBytes = 1 << 20

const seccompProfileField = "node.seccomp_profile"

// LoadSeccompProfile reads the Runtime seccomp profile at path and returns
// its bytes after checking that its SHA-256 is SeccompProfileSHA256 and that
// it is JSON with a non-empty defaultAction. Every failure is an
// errdefs.ErrInvalid for node.seccomp_profile; a file that cannot be read
// also keeps the OS error class (errors.Is(err, fs.ErrNotExist) holds for a
// missing file). Errors never include the file's content.
func LoadSeccompProfile(path string) ([]byte, error) {
	return loadSeccompProfile(path, SeccompProfileSHA256)
}

func loadSeccompProfile(path, wantDigest string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, readError(err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, seccompProfileMaxBytes+1))
	if err != nil {
		return nil, readError(err)
	}
	if len(b) > seccompProfileMaxBytes {
		return nil, errdefs.Invalid(seccompProfileField, "profile file is larger than 1 MiB")
	}
	if seccompprofile.Digest(b) != wantDigest {
		return nil, errdefs.Invalid(seccompProfileField, "profile file is not the shipped profile (SHA-256 mismatch)")
	}
	var p struct {
		DefaultAction string `json:"defaultAction"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, errdefs.Invalid(seccompProfileField, "profile file is not valid JSON")
	}
	if p.DefaultAction == "" {
		return nil, errdefs.Invalid(seccompProfileField, "profile has no defaultAction")
	}
	return b, nil
}

// readError classifies a failure to read the profile file. It keeps the OS
// error (for errors.Is) but drops the *fs.PathError around it, whose text
// repeats the path.
func readError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%w: %w", errdefs.Invalid(seccompProfileField, "cannot read the profile file"), err)
}
