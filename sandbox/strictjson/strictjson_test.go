package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type doc struct {
	Name  string   `json:"name"`
	Count int      `json:"count,omitempty"`
	Tags  []string `json:"tags"`
	Skip  string   `json:"-"`
}

func TestDecode(t *testing.T) {
	var d doc
	if err := Decode([]byte(` {"name":"a","count":2,"tags":["x"]} `), &d, 1024); err != nil || d.Name != "a" || d.Count != 2 {
		t.Fatalf("valid: %+v %v", d, err)
	}
	cases := map[string]struct {
		in   string
		want error
	}{
		"unknown key":     {`{"name":"a","extra":1}`, ErrKey},
		"duplicate key":   {`{"name":"a","name":"b"}`, ErrKey},
		"case alias":      {`{"Name":"a"}`, ErrKey},
		"ignored field":   {`{"Skip":"a"}`, ErrKey},
		"trailing data":   {`{"name":"a"} {}`, ErrMalformed},
		"not an object":   {`["name"]`, ErrMalformed},
		"wrong type":      {`{"count":"two"}`, ErrMalformed},
		"truncated":       {`{"name":"a"`, ErrMalformed},
		"too large":       {`{"name":"` + strings.Repeat("a", 2000) + `"}`, ErrTooLarge},
		"empty":           {``, ErrMalformed},
		"nested dup kept": {`{"tags":["a"],"tags":["b"]}`, ErrKey},
	}
	for name, c := range cases {
		var d doc
		if err := Decode([]byte(c.in), &d, 1024); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
}

func TestTrailingGarbageIsRejected(t *testing.T) {
	for _, in := range []string{`{}A`, `{"name":"a"}x`, `{} 1`, `{}]`} {
		var d doc
		if err := Decode([]byte(in), &d, 1024); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v", in, err)
		}
	}
}

type inner struct {
	Size int `json:"size"`
}

type outer struct {
	In  inner           `json:"in"`
	Ptr *inner          `json:"ptr,omitempty"`
	Raw json.RawMessage `json:"raw,omitempty"`
}

// TestNestedObjectsAreStrictToo: the key rules hold in objects nested in
// struct fields (by value or pointer); a raw field is left to its reader.
func TestNestedObjectsAreStrictToo(t *testing.T) {
	for _, in := range []string{
		`{"in":{"size":1},"ptr":{"size":2},"raw":{"x":1,"x":2,"X":3}}`,
		`{"in":{},"ptr":null}`,
	} {
		var o outer
		if err := Decode([]byte(in), &o, 1024); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
	for _, in := range []string{
		`{"in":{"size":1,"size":2}}`,
		`{"in":{"Size":1}}`,
		`{"ptr":{"size":1,"size":2}}`,
		`{"ptr":{"SIZE":1}}`,
		`{"in":{"other":1}}`,
	} {
		var o outer
		if err := Decode([]byte(in), &o, 1024); !errors.Is(err, ErrKey) {
			t.Errorf("%s: %v, want %v", in, err, ErrKey)
		}
	}
}
