package filexfer

import (
	"io/fs"
	"path"
	"strings"
	"unicode/utf8"
)

// DefaultWorkspacePath is the workspace's absolute path as agents see it.
const DefaultWorkspacePath = "/workspace"

// CleanName checks an entry name lexically and returns its one spelling
// ("a/b"): relative, slash-separated, without "..", and within the
// path_too_long bounds. Empty and "." components are dropped; a name that
// is nothing else ("", ".") or ends in a slash is invalid_archive (a tar
// directory's trailing slash is FromTarHeader's to strip). A ".." is
// refused even when it stays inside, so that duplicates are found by
// comparing names.
func CleanName(name string) (string, error) {
	if err := checkBytes(name); err != nil {
		return "", err
	}
	if strings.HasPrefix(name, "/") {
		return "", refuse(ReasonPathAbsolute, -1)
	}
	if name == "" || strings.HasSuffix(name, "/") {
		return "", refuse(ReasonInvalidArchive, -1)
	}
	parts := make([]string, 0, strings.Count(name, "/")+1)
	for c := range strings.SplitSeq(name, "/") {
		switch {
		case c == "" || c == ".":
			continue
		case c == "..":
			return "", refuse(ReasonPathEscapes, -1)
		case len(c) > MaxComponentBytes:
			return "", refuse(ReasonPathTooLong, -1)
		}
		parts = append(parts, c)
	}
	if len(parts) == 0 {
		return "", refuse(ReasonInvalidArchive, -1)
	}
	return strings.Join(parts, "/"), nil
}

// checkBytes applies the byte rules of path_too_long.
func checkBytes(s string) error {
	if len(s) > MaxPathBytes || strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
		return refuse(ReasonPathTooLong, -1)
	}
	return nil
}

// ResolvePath maps a user's path to a clean path relative to the
// workspace ("." for the workspace itself): p is relative to the
// workspace, or absolute under workspacePath ("" means
// DefaultWorkspacePath). Unlike an entry name, a user's path may hold ".."
// that stays inside, and "" means the workspace. An absolute path outside
// is path_absolute; one that climbs out is path_escapes_workspace.
func ResolvePath(workspacePath, p string) (string, error) {
	if workspacePath == "" {
		workspacePath = DefaultWorkspacePath
	}
	if err := checkBytes(p); err != nil {
		return "", err
	}
	if strings.HasPrefix(p, "/") {
		rel, ok := underWorkspace(workspacePath, p)
		if !ok {
			return "", refuse(ReasonPathAbsolute, -1)
		}
		p = rel
	}
	if p == "" {
		return ".", nil
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", refuse(ReasonPathEscapes, -1)
	}
	for part := range strings.SplitSeq(c, "/") {
		if len(part) > MaxComponentBytes {
			return "", refuse(ReasonPathTooLong, -1)
		}
	}
	return c, nil
}

// underWorkspace returns abs relative to the workspace's absolute path
// when abs (cleaned) lies under it.
func underWorkspace(workspacePath, abs string) (string, bool) {
	ws := path.Clean(workspacePath)
	c := path.Clean(abs)
	switch {
	case c == ws:
		return ".", true
	case ws == "/":
		return strings.TrimPrefix(c, "/"), true
	case strings.HasPrefix(c, ws+"/"):
		return c[len(ws)+1:], true
	}
	return "", false
}

// checkSymlink checks a symlink entry's target: full is the link's clean
// path relative to the workspace root. A relative target is resolved
// lexically from the link's directory; an absolute one must lie under the
// workspace's absolute path.
func checkSymlink(workspacePath, full, target string) error {
	if target == "" {
		return refuse(ReasonInvalidArchive, -1)
	}
	if err := checkBytes(target); err != nil {
		return err
	}
	if strings.HasPrefix(target, "/") {
		if _, ok := underWorkspace(workspacePath, target); !ok {
			return refuse(ReasonSymlinkEscapes, -1)
		}
		return nil
	}
	c := path.Join(path.Dir(full), target)
	if c == ".." || strings.HasPrefix(c, "../") {
		return refuse(ReasonSymlinkEscapes, -1)
	}
	return nil
}

// joinDest joins a clean destination ("." allowed) and a clean name.
func joinDest(dest, name string) string {
	if dest == "." {
		return name
	}
	return dest + "/" + name
}

// keptModeBits are the bits an Entry's Mode may carry.
const keptModeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// ModeFromUnix maps Unix permission bits (the wire's FileEntry.mode: 0777
// plus 04000 setuid, 02000 setgid, 01000 sticky) to an Entry's Mode.
func ModeFromUnix(m uint32) fs.FileMode {
	mode := fs.FileMode(m) & fs.ModePerm
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// UnixMode is ModeFromUnix's inverse.
func UnixMode(mode fs.FileMode) uint32 {
	m := uint32(mode & fs.ModePerm)
	if mode&fs.ModeSetuid != 0 {
		m |= 0o4000
	}
	if mode&fs.ModeSetgid != 0 {
		m |= 0o2000
	}
	if mode&fs.ModeSticky != 0 {
		m |= 0o1000
	}
	return m
}
