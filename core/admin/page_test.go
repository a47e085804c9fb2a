package admin

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"berth.dev/sandbox/errdefs"
)

// seqKeyset lists the numbers 1..total in order; a number is its own
// position. limits records the limit of every fetch.
func seqKeyset(total int, limits *[]int) Keyset[int, int] {
	return Keyset[int, int]{
		Scope: []string{"berth.admin.v1.TestService/ListNumbers", "parent=x"},
		Fetch: func(_ context.Context, after, limit int) ([]int, error) {
			*limits = append(*limits, limit)
			var out []int
			for i := after + 1; i <= total && len(out) < limit; i++ {
				out = append(out, i)
			}
			return out, nil
		},
		Cursor: func(row int) ([]byte, error) { return binary.BigEndian.AppendUint32(nil, uint32(row)), nil },
		Position: func(c []byte) (int, bool) {
			if len(c) != 4 {
				return 0, false
			}
			return int(binary.BigEndian.Uint32(c)), true
		},
	}
}

func TestPaginateWalksEveryRowOnce(t *testing.T) {
	p := newTestPageTokens(t, 1)
	for _, tc := range []struct {
		total, size int
		pages       []int
	}{
		{0, 10, []int{0}},
		{7, 10, []int{7}},
		{10, 10, []int{10}}, // a full last page hands out no token
		{25, 10, []int{10, 10, 5}},
		{30, 10, []int{10, 10, 10}},
	} {
		var limits, got, sizes []int
		ks := seqKeyset(tc.total, &limits)
		token := ""
		for {
			page, next, err := Paginate(context.Background(), p, int32(tc.size), token, ks)
			if err != nil {
				t.Fatalf("total %d: %v", tc.total, err)
			}
			got, sizes = append(got, page...), append(sizes, len(page))
			if next == "" {
				break
			}
			token = next
		}
		want := make([]int, tc.total)
		for i := range want {
			want[i] = i + 1
		}
		if !slices.Equal(got, want) || !slices.Equal(sizes, tc.pages) {
			t.Errorf("total %d by %d: rows %v in pages %v, want pages %v", tc.total, tc.size, got, sizes, tc.pages)
		}
		for _, l := range limits {
			if l != tc.size+1 {
				t.Errorf("fetch limit %d, want the page size and one row more (%d)", l, tc.size+1)
			}
		}
	}
}

func TestPaginatePageSizeRules(t *testing.T) {
	p := newTestPageTokens(t, 1)
	for _, tc := range []struct {
		size  int32
		limit int
	}{{0, DefaultPageSize + 1}, {1, 2}, {MaxPageSize, MaxPageSize + 1}, {MaxPageSize + 1, MaxPageSize + 1}, {1 << 30, MaxPageSize + 1}} {
		var limits []int
		if _, _, err := Paginate(context.Background(), p, tc.size, "", seqKeyset(0, &limits)); err != nil || !slices.Equal(limits, []int{tc.limit}) {
			t.Errorf("page_size %d: fetched with limits %v (%v), want [%d]", tc.size, limits, err, tc.limit)
		}
	}
	var limits []int
	_, _, err := Paginate(context.Background(), p, -1, "", seqKeyset(0, &limits))
	wantField(t, err, "page_size")
	if len(limits) != 0 {
		t.Error("a refused page_size reached the query")
	}
}

func TestPaginateRefusesForeignTokens(t *testing.T) {
	p := newTestPageTokens(t, 1)
	var limits []int
	ks := seqKeyset(30, &limits)
	_, next, err := Paginate(context.Background(), p, 10, "", ks)
	if err != nil || next == "" {
		t.Fatalf("first page: %q, %v", next, err)
	}
	other := ks
	other.Scope = []string{"berth.admin.v1.TestService/ListNumbers", "parent=y"}
	for name, tc := range map[string]struct {
		pages *PageTokens
		token string
		ks    Keyset[int, int]
	}{
		"another scope":   {p, next, other},
		"another key":     {newTestPageTokens(t, 2), next, ks},
		"not a token":     {p, "bm90IGEgdG9rZW4", ks},
		"a bad position":  {p, p.Encode([]byte{1, 2, 3}, ks.Scope...), ks},
		"truncated token": {p, next[:len(next)-2], ks},
	} {
		limits = limits[:0]
		_, _, err := Paginate(context.Background(), tc.pages, 10, tc.token, tc.ks)
		wantField(t, err, "page_token")
		if len(limits) != 0 {
			t.Errorf("%s: a refused page_token reached the query", name)
		}
	}
}

func TestPaginatePassesListErrorsOn(t *testing.T) {
	p := newTestPageTokens(t, 1)
	var limits []int
	ks := seqKeyset(30, &limits)
	fetchErr := errors.New("list numbers: query failed")
	failing := ks
	failing.Fetch = func(context.Context, int, int) ([]int, error) { return nil, fetchErr }
	if _, _, err := Paginate(context.Background(), p, 10, "", failing); !errors.Is(err, fetchErr) {
		t.Errorf("fetch error came back as %v", err)
	}
	cursorErr := errors.New("list numbers: corrupt row")
	failing = ks
	failing.Cursor = func(int) ([]byte, error) { return nil, cursorErr }
	if _, _, err := Paginate(context.Background(), p, 10, "", failing); !errors.Is(err, cursorErr) {
		t.Errorf("cursor error came back as %v", err)
	}
}

func wantField(t *testing.T, err error, field string) {
	t.Helper()
	var fe *errdefs.FieldError
	if !errors.Is(err, errdefs.ErrInvalid) || !errors.As(err, &fe) || fe.Field != field {
		t.Errorf("error %v, want errdefs.Invalid naming %s", err, field)
	}
}
