package runtimebootstrap

import (
	"bytes"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

func validFile() File {
	return File{
		Version:    Version,
		CoreURL:    "https://core.example.test:8443/berth",
		DeviceID:   "6f1c2f5e-3a4b-4c5d-8e9f-0a1b2c3d4e5f",
		Credential: NewSecret(strings.Repeat("k", 43)),
	}
}

func TestValidateAcceptsValidFile(t *testing.T) {
	if err := validFile().Validate(); err != nil {
		t.Fatalf("valid file rejected: %v", err)
	}
}

func TestValidateRejects(t *testing.T) {
	cases := map[string]func(*File){
		"version":            func(f *File) { f.Version = 2 },
		"empty url":          func(f *File) { f.CoreURL = "" },
		"url scheme":         func(f *File) { f.CoreURL = "ftp://core.example.test" },
		"url user":           func(f *File) { f.CoreURL = "https://u:p@core.example.test" },
		"url query":          func(f *File) { f.CoreURL = "https://core.example.test/?x=1" },
		"url dotdot":         func(f *File) { f.CoreURL = "https://core.example.test/a/../b" },
		"url no host":        func(f *File) { f.CoreURL = "https:///path" },
		"device id":          func(f *File) { f.DeviceID = "not-a-uuid" },
		"device id upper":    func(f *File) { f.DeviceID = strings.ToUpper(f.DeviceID) },
		"device id braces":   func(f *File) { f.DeviceID = "{" + f.DeviceID + "}" },
		"credential short":   func(f *File) { f.Credential = NewSecret("short") },
		"credential long":    func(f *File) { f.Credential = NewSecret(strings.Repeat("k", MaxCredentialBytes+1)) },
		"credential space":   func(f *File) { f.Credential = NewSecret(strings.Repeat("k", 40) + " x") },
		"credential nul":     func(f *File) { f.Credential = NewSecret(strings.Repeat("k", 40) + "\x00") },
		"credential unicode": func(f *File) { f.Credential = NewSecret(strings.Repeat("k", 40) + "é") },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			f := validFile()
			mutate(&f)
			err := f.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			if c := f.Credential.Reveal(); len(c) > 0 && strings.Contains(err.Error(), c) {
				t.Fatalf("error leaks the credential: %v", err)
			}
		})
	}
}

// TestSecretsNeverPrint prints each type that holds a Secret through fmt
// (every verb) and slog's text and JSON handlers, as a value, a pointer,
// and inside a struct. (The check is a small copy of sandbox/redacttest's,
// which this leaf module cannot import.)
func TestSecretsNeverPrint(t *testing.T) {
	f := validFile()
	f.Credential = NewSecret("n3ver-printed-device-credential-0123456789abcdef")
	secret := f.Credential.Reveal()
	for name, v := range map[string]any{"Secret": f.Credential, "File": f} {
		t.Run(name, func(t *testing.T) {
			for _, w := range wrapped(v) {
				for _, out := range printed(w) {
					if strings.Contains(out, secret) {
						t.Errorf("%T printed the secret: %s", w, out)
					}
				}
			}
		})
	}
}

// wrapped is v, a pointer to it, and structs holding either in an
// exported and in an unexported field (where fmt cannot call methods).
func wrapped(v any) []any {
	ptr := reflect.New(reflect.TypeOf(v))
	ptr.Elem().Set(reflect.ValueOf(v))
	holder := func(fv reflect.Value) any {
		st := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "Held", Type: fv.Type()}})).Elem()
		st.Field(0).Set(fv)
		return st.Interface()
	}
	return []any{v, ptr.Interface(), holder(reflect.ValueOf(v)), holder(ptr),
		unexported{v}, unexported{ptr.Interface()}, &unexported{v}}
}

type unexported struct{ held any }

// printed is what fmt and slog make of v.
func printed(v any) []string {
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		out = append(out, fmt.Sprintf(verb, v))
	}
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		slog.New(h).Info("m", "value", v, slog.Group("g", "value", v))
		slog.New(h).With("value", v).Info("m")
	}
	return append(out, fmt.Sprint(v), buf.String())
}

func TestEncodeCarriesCredentialOnlyInTheFile(t *testing.T) {
	f := validFile()
	data, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"credential":"`+f.Credential.Reveal()+`"`) {
		t.Fatalf("encoded file lacks the credential: %s", data)
	}
	f.Version = 0
	if _, err := Encode(f); err == nil {
		t.Fatal("Encode accepted an invalid file")
	}
}
