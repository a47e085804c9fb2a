package admin

import (
	"context"

	"berth.dev/sandbox/errdefs"
)

// Keyset is one list method's listing as Paginate pages it: rows in a
// fixed total order (creation time then id, a sequence number, ...), each
// at a position K in that order. A list implementation gives only its
// query and how a position is written into a page cursor; the page size
// rules, the page token and the look-ahead row are Paginate's.
type Keyset[T, K any] struct {
	// Scope is the page token scope: the method and every request
	// parameter that shapes the listing except page_size (PageTokens).
	Scope []string
	// Fetch returns up to limit rows after position after, in the
	// listing's order; the zero K is the start. Its errors come back from
	// Paginate unchanged.
	Fetch func(ctx context.Context, after K, limit int) ([]T, error)
	// Cursor writes the position of row into a page cursor (at most
	// MaxCursorBytes). An error (a row that cannot be a position, which
	// only a bug or a corrupt row makes) comes back from Paginate
	// unchanged.
	Cursor func(row T) ([]byte, error)
	// Position reads a cursor that Cursor wrote back into a position;
	// false for anything else, which Paginate refuses as a bad page_token.
	Position func(cursor []byte) (K, bool)
}

// Paginate returns the page of ks that a request's page_size and
// page_token ask for, and the page token of the next page ("" on the last
// page).
//
// page_size follows PageSize (0 is DefaultPageSize, more than MaxPageSize
// is MaxPageSize, negative is invalid); page_token must be one that pages
// minted for ks.Scope. Both are refused as errdefs.Invalid naming the
// field. Paginate fetches one row past the page: only when it arrives is
// there a next page, whose token holds the position of the page's last
// row, so the last page never hands out a token that lists nothing.
func Paginate[T, K any](ctx context.Context, pages *PageTokens, pageSize int32, pageToken string, ks Keyset[T, K]) ([]T, string, error) {
	n, err := PageSize("page_size", pageSize)
	if err != nil {
		return nil, "", err
	}
	raw, err := pages.Decode("page_token", pageToken, ks.Scope...)
	if err != nil {
		return nil, "", err
	}
	var after K
	if raw != nil {
		var ok bool
		if after, ok = ks.Position(raw); !ok {
			// The MAC matched, so only a bug could produce this.
			return nil, "", errdefs.Invalid("page_token", reasonBadPageToken)
		}
	}
	rows, err := ks.Fetch(ctx, after, n+1)
	if err != nil {
		return nil, "", err
	}
	if len(rows) <= n {
		return rows, "", nil
	}
	rows = rows[:n:n]
	cursor, err := ks.Cursor(rows[n-1])
	if err != nil {
		return nil, "", err
	}
	return rows, pages.Encode(cursor, ks.Scope...), nil
}

// Protos converts a page of rows into their messages, in order, for a list
// response (nil for an empty page, as the response had no rows).
func Protos[T, P any](rows []T, proto func(T) P) []P {
	var out []P
	for _, r := range rows {
		out = append(out, proto(r))
	}
	return out
}
