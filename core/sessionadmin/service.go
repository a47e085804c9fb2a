package sessionadmin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
)

// Store is what the Session and allocation admin logic reads.
type Store interface {
	GetSession(ctx context.Context, id uuid.UUID) (store.SessionBundle, error)
	ListSessionsByAge(ctx context.Context, limit int, after store.AgeCursor, includeDeleted bool) (page []store.SessionBundle, err error)
	RuntimeReadiness(ctx context.Context, allocationIDs []uuid.UUID) (map[uuid.UUID]store.RuntimeReadiness, error)
	GetSessionAllocation(ctx context.Context, id uuid.UUID) (store.SessionAllocation, error)
	ListAllocationsByAge(ctx context.Context, limit int, after store.AgeCursor, includeReleased bool) ([]store.SessionAllocation, error)
}

// MaxDisplayNameLen bounds a Session's display_name (characters), as
// session.proto states.
const MaxDisplayNameLen = 63

// Service is the logic of berth.admin.v1.SessionService and
// berth.admin.v1.AllocationService.
type Service struct {
	sessions *sessions.Service
	store    Store
	tenant   uuid.UUID
	pages    *admin.PageTokens
}

// NewService returns the logic over sess (which creates and deletes) and
// st (which reads). tenant is the tenant id every Session created through
// the admin API belongs to: the admin API has no tenant field, so Core
// passes its one default tenant. pages mints and checks the list calls'
// page tokens (its key must outlive restarts).
func NewService(sess *sessions.Service, st Store, tenant uuid.UUID, pages *admin.PageTokens) (*Service, error) {
	switch {
	case sess == nil:
		return nil, errors.New("sessionadmin: no sessions service")
	case st == nil:
		return nil, errors.New("sessionadmin: no store")
	case pages == nil:
		return nil, errors.New("sessionadmin: no page tokens")
	case tenant == uuid.Nil:
		return nil, errors.New("sessionadmin: no tenant id")
	}
	return &Service{sessions: sess, store: st, tenant: tenant, pages: pages}, nil
}

// CreateSession commits a Session for request requestID (a canonical
// UUID) with the optional displayName. A retry with the same requestID
// returns the Session the first call created; with another displayName
// it is errdefs.ErrExists. Without a committed deployment, or without a
// node with room (enabled, present by its durable record, ready for the
// generation, within capacity), it is errdefs.ErrFailedPrecondition and
// creates nothing.
func (s *Service) CreateSession(ctx context.Context, requestID, displayName string) (store.SessionBundle, error) {
	if err := admin.ValidateRequestID("request_id", requestID); err != nil {
		return store.SessionBundle{}, err
	}
	if err := validateDisplayName("session.display_name", displayName); err != nil {
		return store.SessionBundle{}, err
	}
	b, err := s.sessions.Create(ctx, sessions.CreateRequest{
		RequestID:   uuid.MustParse(requestID),
		TenantID:    s.tenant,
		DisplayName: displayName,
	})
	if err != nil {
		return store.SessionBundle{}, err
	}
	return b, nil
}

// validateDisplayName checks an optional display name: valid UTF-8 of at
// most MaxDisplayNameLen characters, no control characters.
func validateDisplayName(field, v string) error {
	if !utf8.ValidString(v) || utf8.RuneCountInString(v) > MaxDisplayNameLen {
		return errdefs.Invalid(field, fmt.Sprintf("must be valid UTF-8 of at most %d characters", MaxDisplayNameLen))
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return errdefs.Invalid(field, "must not contain control characters")
		}
	}
	return nil
}

// GetSession returns Session name ("sessions/{session}").
func (s *Service) GetSession(ctx context.Context, name string) (store.SessionBundle, error) {
	id, err := parseID("name", name, admin.SessionName)
	if err != nil {
		return store.SessionBundle{}, err
	}
	b, err := s.store.GetSession(ctx, id)
	if err != nil {
		return store.SessionBundle{}, fmt.Errorf("get session: %w", err)
	}
	return b, nil
}

// DeleteSession requests the deletion of Session name and the cleanup of
// its allocation (sessions.Service.Delete). Deleting again changes
// nothing and returns the Session as it is.
func (s *Service) DeleteSession(ctx context.Context, name string) (store.SessionBundle, error) {
	id, err := parseID("name", name, admin.SessionName)
	if err != nil {
		return store.SessionBundle{}, err
	}
	b, err := s.sessions.Delete(ctx, id)
	if err != nil {
		return store.SessionBundle{}, fmt.Errorf("delete session: %w", err)
	}
	return b, nil
}

// ListSessions returns one page of Sessions in creation order and the
// page token of the next page ("" on the last); deleted Sessions only with
// showDeleted.
func (s *Service) ListSessions(ctx context.Context, pageSize int32, pageToken string, showDeleted bool) ([]store.SessionBundle, string, error) {
	return admin.Paginate(ctx, s.pages, pageSize, pageToken, admin.Keyset[store.SessionBundle, store.AgeCursor]{
		Scope: []string{scopeListSessions, flagScope("show_deleted", showDeleted)},
		Fetch: func(ctx context.Context, after store.AgeCursor, limit int) ([]store.SessionBundle, error) {
			page, err := s.store.ListSessionsByAge(ctx, limit, after, showDeleted)
			if err != nil {
				return nil, fmt.Errorf("list sessions: %w", err)
			}
			return page, nil
		},
		Cursor: func(b store.SessionBundle) ([]byte, error) {
			return encodeCursor(store.AgeCursor{CreatedAt: b.Session.CreatedAt, ID: b.Session.ID}), nil
		},
		Position: decodeCursor,
	})
}

// Readiness returns the Runtime readiness of the bundles' allocations.
func (s *Service) Readiness(ctx context.Context, bundles ...store.SessionBundle) (map[uuid.UUID]store.RuntimeReadiness, error) {
	ids := make([]uuid.UUID, 0, len(bundles))
	for _, b := range bundles {
		if b.Allocation.ID != uuid.Nil {
			ids = append(ids, b.Allocation.ID)
		}
	}
	r, err := s.store.RuntimeReadiness(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("runtime readiness: %w", err)
	}
	return r, nil
}

// GetAllocation returns allocation name ("allocations/{allocation}").
func (s *Service) GetAllocation(ctx context.Context, name string) (store.SessionAllocation, error) {
	id, err := parseID("name", name, admin.AllocationName)
	if err != nil {
		return store.SessionAllocation{}, err
	}
	a, err := s.store.GetSessionAllocation(ctx, id)
	if err != nil {
		return store.SessionAllocation{}, fmt.Errorf("get allocation: %w", err)
	}
	return a, nil
}

// ListAllocations returns one page of allocations in creation order and
// the page token of the next page ("" on the last); released ones only
// with showReleased.
func (s *Service) ListAllocations(ctx context.Context, pageSize int32, pageToken string, showReleased bool) ([]store.SessionAllocation, string, error) {
	return admin.Paginate(ctx, s.pages, pageSize, pageToken, admin.Keyset[store.SessionAllocation, store.AgeCursor]{
		Scope: []string{scopeListAllocations, flagScope("show_released", showReleased)},
		Fetch: func(ctx context.Context, after store.AgeCursor, limit int) ([]store.SessionAllocation, error) {
			page, err := s.store.ListAllocationsByAge(ctx, limit, after, showReleased)
			if err != nil {
				return nil, fmt.Errorf("list allocations: %w", err)
			}
			return page, nil
		},
		Cursor: func(a store.SessionAllocation) ([]byte, error) {
			return encodeCursor(store.AgeCursor{CreatedAt: a.CreatedAt, ID: a.ID}), nil
		},
		Position: decodeCursor,
	})
}

// parseID validates name against p and returns its one UUID id.
func parseID(field, name string, p admin.Pattern) (uuid.UUID, error) {
	ids, err := admin.ValidateName(field, name, p)
	if err != nil {
		return uuid.Nil, err
	}
	return uuid.MustParse(ids[0]), nil
}

// The list calls' page token scopes: the method and every request field
// that shapes the listing, so a token is refused by another method or
// with another filter.
const (
	scopeListSessions    = "berth.admin.v1.SessionService/ListSessions"
	scopeListAllocations = "berth.admin.v1.AllocationService/ListAllocations"
)

func flagScope(name string, v bool) string { return fmt.Sprintf("%s=%t", name, v) }

// cursorLen is the length of an encoded keyset cursor: the creation time
// in Unix microseconds (big-endian; the database keeps microseconds) and
// the 16 bytes of the id.
const cursorLen = 8 + 16

func encodeCursor(c store.AgeCursor) []byte {
	b := make([]byte, 8, cursorLen)
	binary.BigEndian.PutUint64(b, uint64(c.CreatedAt.UnixMicro()))
	return append(b, c.ID[:]...)
}

func decodeCursor(b []byte) (store.AgeCursor, bool) {
	if len(b) != cursorLen {
		return store.AgeCursor{}, false
	}
	return store.AgeCursor{
		CreatedAt: time.UnixMicro(int64(binary.BigEndian.Uint64(b[:8]))),
		ID:        uuid.UUID(b[8:]),
	}, true
}
