package strictjson

import (
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
