// Package strictjson decodes outside JSON documents strictly: one object,
// bounded size, no unknown, duplicate or case-aliased keys (encoding/json
// alone matches keys case-insensitively and keeps the last duplicate), no
// trailing data. Errors are fixed phrases that never echo the input.
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
	known := jsonKeys(reflect.TypeOf(v).Elem())
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return ErrMalformed
	}
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
		if !known[key] || seen[key] {
			return ErrKey
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return ErrMalformed
		}
	}
	if _, err := dec.Token(); err != nil {
		return ErrMalformed
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

// jsonKeys returns the exact JSON names of a struct's exported fields.
func jsonKeys(t reflect.Type) map[string]bool {
	keys := map[string]bool{}
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
		keys[name] = true
	}
	return keys
}
