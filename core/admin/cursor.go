package admin

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// AgeCursorLen is the length of an encoded creation-order keyset cursor:
// the creation time in Unix microseconds (big-endian; the database keeps
// microseconds) and the 16 bytes of the row's id. The encoding is part of
// every page token already handed out: changing it invalidates them.
const AgeCursorLen = 8 + 16

// EncodeAgeCursor encodes the position of the row created at createdAt
// with the 16-byte id.
func EncodeAgeCursor(createdAt time.Time, id []byte) []byte {
	b := make([]byte, 8, AgeCursorLen)
	binary.BigEndian.PutUint64(b, uint64(createdAt.UnixMicro()))
	return append(b, id...)
}

// DecodeAgeCursor splits a cursor EncodeAgeCursor made; any other shape is
// a bad page token (ok false).
func DecodeAgeCursor(b []byte) (createdAt time.Time, id []byte, ok bool) {
	if len(b) != AgeCursorLen {
		return time.Time{}, nil, false
	}
	return time.UnixMicro(int64(binary.BigEndian.Uint64(b[:8]))), b[8:], true
}

// FlagScope is the page token scope entry of a boolean request field that
// shapes a listing ("show_removed=true").
func FlagScope(name string, v bool) string { return fmt.Sprintf("%s=%t", name, v) }

// Timestamp converts an optional time, leaving nil and the zero time unset.
func Timestamp(t *time.Time) *timestamppb.Timestamp {
	if t == nil || t.IsZero() {
		return nil
	}
	return timestamppb.New(*t)
}

// StateValue maps a logic state named name ("timed_out") to the value of
// the API enum value named "STATE_" + NAME, from the enum's generated
// <Enum>_value map, and 0 (STATE_UNSPECIFIED) when the API has none: the
// API's state names are the logic's, by rule, so one function maps every
// state enum whose logic states are named.
func StateValue(values map[string]int32, name string) int32 {
	return values["STATE_"+strings.ToUpper(name)]
}
