package admin

import (
	"fmt"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/structpb"

	"berth.dev/sandbox/errdefs"
)

// The fixed reasons of this package's field errors.
const (
	reasonRequired      = "required"
	reasonNotUUID       = "must be a canonical UUID"
	reasonNegative      = "must not be negative"
	reasonBadPageToken  = "invalid page token"
	reasonNameTooLong   = "too long"
	reasonNameMalformed = "must match "
)

// maxNameLen bounds a resource name before it is parsed.
const maxNameLen = 256

// IDRule checks one id segment of a resource name.
type IDRule func(id string) bool

// UUIDID accepts a canonical (lowercase, hyphenated) UUID: the ids Core
// assigns to nodes, Sessions, Turns and allocations.
func UUIDID(id string) bool {
	u, err := uuid.Parse(id)
	return err == nil && u.String() == id
}

// HexID128 accepts 32 lowercase hex digits: an enrollment token's id.
func HexID128(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Pattern is an AIP resource name template such as
// "sessions/{session}/turns/{turn}": literal segments and id variables.
type Pattern struct {
	template string
	segments []segment
}

type segment struct {
	literal string
	id      IDRule // nil for a literal segment
}

// MustPattern compiles template. Each {variable} takes the matching rule of
// rules in order; without rules every variable is a UUIDID. It panics on a
// malformed template or a rule count that does not match: patterns are
// package-level constants.
func MustPattern(template string, rules ...IDRule) Pattern {
	p := Pattern{template: template}
	vars := 0
	for _, s := range strings.Split(template, "/") {
		switch {
		case s == "":
			panic("admin: empty segment in pattern " + template)
		case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") && len(s) > 2:
			rule := IDRule(UUIDID)
			if len(rules) > 0 {
				if vars >= len(rules) {
					panic("admin: too few id rules for pattern " + template)
				}
				rule = rules[vars]
			}
			p.segments = append(p.segments, segment{id: rule})
			vars++
		case strings.ContainsAny(s, "{}"):
			panic("admin: malformed segment in pattern " + template)
		default:
			p.segments = append(p.segments, segment{literal: s})
		}
	}
	if len(rules) > 0 && vars != len(rules) {
		panic("admin: id rules do not match pattern " + template)
	}
	return p
}

// String returns the template.
func (p Pattern) String() string { return p.template }

// Format builds a name from ids, one per variable in order. It does not
// validate them.
func (p Pattern) Format(ids ...string) string {
	parts := make([]string, len(p.segments))
	n := 0
	for i, s := range p.segments {
		if s.id == nil {
			parts[i] = s.literal
			continue
		}
		if n < len(ids) {
			parts[i] = ids[n]
		}
		n++
	}
	return strings.Join(parts, "/")
}

// The admin API's resource names.
var (
	InstallationName    = MustPattern("installation")
	DeploymentName      = MustPattern("deployment")
	NodeName            = MustPattern("nodes/{node}")
	EnrollmentTokenName = MustPattern("enrollmentTokens/{token}", HexID128)
	SessionName         = MustPattern("sessions/{session}")
	TurnName            = MustPattern("sessions/{session}/turns/{turn}")
	AllocationName      = MustPattern("allocations/{allocation}")
	TenantName          = MustPattern("tenants/{tenant}")
	ProjectName         = MustPattern("tenants/{tenant}/projects/{project}")
	ProjectKeyName      = MustPattern("tenants/{tenant}/projects/{project}/keys/{key}")
	ResetName           = MustPattern("resets/{reset}")
)

// LatestReset is the name of the latest deployment reset ("resets/-").
const LatestReset = "resets/-"

// ValidateName checks that value is a name of pattern p and returns its ids
// in order (none for a singleton such as "installation"). Errors are
// errdefs.Invalid naming field; they never echo value.
func ValidateName(field, value string, p Pattern) ([]string, error) {
	if value == "" {
		return nil, errdefs.Invalid(field, reasonRequired)
	}
	if len(value) > maxNameLen {
		return nil, errdefs.Invalid(field, reasonNameTooLong)
	}
	parts := strings.Split(value, "/")
	if len(parts) != len(p.segments) {
		return nil, errdefs.Invalid(field, reasonNameMalformed+p.template)
	}
	var ids []string
	for i, s := range p.segments {
		if s.id == nil {
			if parts[i] != s.literal {
				return nil, errdefs.Invalid(field, reasonNameMalformed+p.template)
			}
			continue
		}
		if !s.id(parts[i]) {
			return nil, errdefs.Invalid(field, reasonNameMalformed+p.template)
		}
		ids = append(ids, parts[i])
	}
	return ids, nil
}

// ValidateRequestID checks a required request_id: a canonical UUID chosen
// by the caller, the retry identity of a creation.
func ValidateRequestID(field, value string) error {
	if value == "" {
		return errdefs.Invalid(field, reasonRequired)
	}
	if !UUIDID(value) {
		return errdefs.Invalid(field, reasonNotUUID)
	}
	return nil
}

// The page size bounds of every list call.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// PageSize resolves a request's page_size as AIP-158 describes: 0 means
// DefaultPageSize, values above MaxPageSize are read as MaxPageSize, and a
// negative value is invalid. The result is always in 1..MaxPageSize.
func PageSize(field string, size int32) (int, error) {
	switch {
	case size < 0:
		return 0, errdefs.Invalid(field, reasonNegative)
	case size == 0:
		return DefaultPageSize, nil
	case size > MaxPageSize:
		return MaxPageSize, nil
	}
	return int(size), nil
}

// ValidateStruct refuses a google.protobuf.Struct nested deeper than
// MaxStructDepth (objects and lists; s itself is depth 1), naming field.
// The walk stops at the first level past the bound, so a refused value
// costs no more than an accepted one.
func ValidateStruct(field string, s *structpb.Struct) error {
	if !structWithin(s, MaxStructDepth) {
		return errdefs.Invalid(field, fmt.Sprintf("nested deeper than %d levels", MaxStructDepth))
	}
	return nil
}

// structWithin reports whether s nests at most depth levels.
func structWithin(s *structpb.Struct, depth int) bool {
	if depth < 1 {
		return false
	}
	for _, v := range s.GetFields() {
		if !valueWithin(v, depth) {
			return false
		}
	}
	return true
}

// valueWithin reports whether v, a member of a container at depth levels
// of budget, fits in it.
func valueWithin(v *structpb.Value, depth int) bool {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		return structWithin(k.StructValue, depth-1)
	case *structpb.Value_ListValue:
		if depth-1 < 1 {
			return false
		}
		for _, e := range k.ListValue.GetValues() {
			if !valueWithin(e, depth-1) {
				return false
			}
		}
	}
	return true
}
