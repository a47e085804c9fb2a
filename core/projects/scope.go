package projects

import (
	"errors"

	"github.com/google/uuid"
)

// errNoScope is Check's refusal: an internal fault (unclassified, so the
// admin API answers INTERNAL), never a caller's.
var errNoScope = errors.New("projects: call has no scope")

// Scope is what one call may see and touch: every project (All, an
// administrator's call) or one project (In, a project key's call or an
// administrator's filter). Logic and store reads take it explicitly, so a
// forgotten scope is a compile error, and the zero Scope is invalid
// (Check), so a scope left unset fails every call instead of widening.
type Scope struct {
	project uuid.UUID
	all     bool
}

// All is the administrator's scope: every project.
func All() Scope { return Scope{all: true} }

// In is the scope of one project. In(uuid.Nil) is invalid.
func In(project uuid.UUID) Scope { return Scope{project: project} }

// None is a valid scope that sees nothing that exists: In(uuid.Max), an
// id no project has (Core makes random version 4 ids). It is what a filter
// naming a project that does not exist narrows to.
func None() Scope { return In(uuid.Max) }

// Project returns the one project the scope is limited to; ok is false for
// All.
func (s Scope) Project() (project uuid.UUID, ok bool) {
	if s.all {
		return uuid.Nil, false
	}
	return s.project, true
}

// Check refuses the zero Scope and In(uuid.Nil): an internal fault, never
// a caller's, since only Core makes scopes.
func (s Scope) Check() error {
	if !s.all && s.project == uuid.Nil {
		return errNoScope
	}
	return nil
}

// Sees reports whether a resource of project is in the scope.
func (s Scope) Sees(project uuid.UUID) bool {
	return s.all || (s.project != uuid.Nil && s.project == project)
}

// Narrow limits s to project, an administrator's filter: All narrows to
// In(project); a one-project scope stays itself when it names the same
// project and otherwise becomes a scope that sees nothing that exists
// (another project's resources are indistinguishable from missing ones).
// uuid.Nil leaves s unchanged (no filter).
func (s Scope) Narrow(project uuid.UUID) Scope {
	switch {
	case project == uuid.Nil:
		return s
	case s.all, s.project == project:
		return In(project)
	default:
		return None()
	}
}
