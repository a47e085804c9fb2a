package filexfer

import (
	"archive/tar"
	"strings"
)

// FromTarHeader maps a tar header to an Entry, with the refusals a Writer
// would give for its name and type: regular files (a sparse one with its
// logical size, h.Size), directories (a trailing slash allowed),
// symlinks and hard links; devices, FIFOs and unknown types are
// file_type_refused. Owners are ignored. The entry index of a refusal is
// -1: the caller knows it.
func FromTarHeader(h *tar.Header) (Entry, error) {
	var e Entry
	name := h.Name
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse: //nolint:staticcheck // TypeRegA is what old archives carry
		e.Kind = KindFile
		if h.Size < 0 {
			return Entry{}, refuse(ReasonInvalidArchive, -1)
		}
		e.Size = h.Size
	case tar.TypeDir:
		e.Kind = KindDir
		name = strings.TrimSuffix(name, "/")
	case tar.TypeSymlink:
		e.Kind, e.Link = KindSymlink, h.Linkname
	case tar.TypeLink:
		e.Kind, e.Link = KindHardlink, h.Linkname
	default:
		return Entry{}, refuse(ReasonFileTypeRefused, -1)
	}
	clean, err := CleanName(name)
	if err != nil {
		return Entry{}, err
	}
	e.Name = clean
	e.Mode = ModeFromUnix(uint32(h.Mode & 0o7777))
	e.ModTime = h.ModTime
	return e, nil
}

// TarHeader is the PAX header of e, for a download packed as tar: a
// directory's name ends in "/", owners are left unset (0).
func TarHeader(e Entry) *tar.Header {
	h := &tar.Header{
		Name:    e.Name,
		Mode:    int64(UnixMode(e.Mode & keptModeBits)),
		ModTime: e.ModTime,
		Format:  tar.FormatPAX,
	}
	switch e.Kind {
	case KindFile:
		h.Typeflag, h.Size = tar.TypeReg, e.Size
	case KindDir:
		h.Typeflag, h.Name = tar.TypeDir, e.Name+"/"
	case KindSymlink:
		h.Typeflag, h.Linkname = tar.TypeSymlink, e.Link
	case KindHardlink:
		h.Typeflag, h.Linkname = tar.TypeLink, e.Link
	}
	return h
}
