package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
)

// Errors returned by Decode.
var (
	ErrTooLarge  = errors.New("document too large")
	ErrMalformed = errors.New("malformed document")
	ErrKey       = errors.New("unknown, duplicate or case-aliased key")
)

// Decode decodes the JSON object raw into the struct pointed to by v.
func Decode(raw []byte, v any, maxBytes int) error {
	if len(raw) > maxBytes {
		return ErrTooLarge
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := checkObject(dec, reflect.TypeOf(v).Elem()); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrMalformed // trailing data, valid or not
	}
	full := json.NewDecoder(bytes.NewReader(raw))
	full.DisallowUnknownFields()
	if err := full.Decode(v); err != nil {
		return ErrMalformed
	}
	return nil
}

// checkObject reads one JSON object from dec and checks its keys against
// the struct type t: each key a field's exact JSON name, at most once. A
// field whose type is a struct (or a pointer to one) that decodes itself
// by its fields is checked the same way, so the rules hold at every depth;
// any other value is only read past.
func checkObject(dec *json.Decoder, t reflect.Type) error {
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return ErrMalformed
	}
	known := jsonKeys(t)
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ErrMalformed
		}
		key, ok := tok.(string)
		if !ok {
			return ErrMalformed
		}
		ft, ok := known[key]
		if !ok || seen[key] {
			return ErrKey
		}
		seen[key] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return ErrMalformed
		}
		if nested := structOf(ft); nested != nil && bytes.HasPrefix(bytes.TrimSpace(value), []byte("{")) {
			inner := json.NewDecoder(bytes.NewReader(value))
			if err := checkObject(inner, nested); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return ErrMalformed
	}
	return nil
}

// structOf returns the struct type a field of type t decodes by its
// fields (t or *t), or nil: any other type, or one with its own
// UnmarshalJSON, is checked only by encoding/json.
func structOf(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	unmarshaler := reflect.TypeFor[json.Unmarshaler]()
	if t.Kind() != reflect.Struct || t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler) {
		return nil
	}
	return t
}

// jsonKeys returns the exact JSON names of a struct's exported fields,
// with each field's type.
func jsonKeys(t reflect.Type) map[string]reflect.Type {
	keys := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		keys[name] = f.Type
	}
	return keys
}
