package admin

import (
	"strings"

	"berth.dev/sandbox/errdefs"
)

// FieldPaths maps the field names of the logic's invalid errors to the
// request's field paths. The logic names its own fields ("provider.kind",
// "command.argv"); only the adapter knows where they sit in a request
// ("candidate.provider_kind", "turn.command.argv.args").
type FieldPaths struct {
	// Renames are tried in order: put a longer prefix before a shorter
	// one. A rename matches the field itself or any path below it.
	Renames []Rename
	// Default is the path of a field that matches no rename; empty keeps
	// the logic's name.
	Default string
}

// Rename maps From (and every path below it) to To.
type Rename struct{ From, To string }

// Map returns err with its field renamed: an error without a
// errdefs.FieldError passes unchanged; one with it becomes a FieldError of
// the request's path and the same authored reason (the class is all that
// crosses the boundary besides, so the wrapping is not kept).
func (p FieldPaths) Map(err error) error {
	fe, ok := errdefs.AsField(err)
	if !ok {
		return err
	}
	return errdefs.Invalid(p.path(fe.Field), fe.Reason)
}

func (p FieldPaths) path(field string) string {
	for _, r := range p.Renames {
		if field == r.From {
			return r.To
		}
		if rest, ok := strings.CutPrefix(field, r.From+"."); ok {
			return r.To + "." + rest
		}
	}
	if p.Default != "" {
		return p.Default
	}
	return field
}
