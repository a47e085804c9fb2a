package redacttest

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// Verbs are the fmt verbs Check prints with.
var Verbs = []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"}

// Check fails t when any printer shows any of secrets (the secret's bytes,
// in any of the forms a printer gives them) for v: fmt with every verb in
// Verbs and slog's TextHandler and JSONHandler, for v itself, a pointer to
// v, and v or a pointer to it in an exported and in an unexported struct
// field. secrets must be distinctive (at least 8 bytes): a short secret
// could appear by chance.
func Check(t testing.TB, v any, secrets ...[]byte) {
	t.Helper()
	if v == nil {
		t.Fatal("redacttest: nil value")
	}
	var needles []string
	for _, s := range secrets {
		if len(s) < 8 {
			t.Fatalf("redacttest: secret of %d bytes is too short to look for", len(s))
		}
		needles = append(needles, forms(s)...)
	}
	for name, w := range wrappings(v) {
		for _, out := range printed(w) {
			for _, n := range needles {
				if strings.Contains(out, n) {
					t.Errorf("%T (%s) printed its secret: %s", v, name, out)
				}
			}
		}
	}
}

// forms are the secret as the printers may show it.
func forms(s []byte) []string {
	q := strconv.Quote(string(s))
	return []string{
		string(s),
		q[1 : len(q)-1],
		hex.EncodeToString(s),
		strings.ToUpper(hex.EncodeToString(s)),
		base64.StdEncoding.EncodeToString(s)[:len(s)*4/3],
		base64.RawURLEncoding.EncodeToString(s)[:len(s)*4/3],
		strings.Trim(fmt.Sprintf("%d", s), "[]"),
	}
}

// wrappings are v, a pointer to it, and structs holding either.
func wrappings(v any) map[string]any {
	t := reflect.TypeOf(v)
	ptr := reflect.New(t)
	ptr.Elem().Set(reflect.ValueOf(v))
	holder := func(ft reflect.Type, fv reflect.Value) any {
		st := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "Secret", Type: ft}})).Elem()
		st.Field(0).Set(fv)
		return st.Interface()
	}
	return map[string]any{
		"value":               v,
		"pointer":             ptr.Interface(),
		"in a struct":         holder(t, reflect.ValueOf(v)),
		"pointer in a struct": holder(ptr.Type(), ptr),
		// fmt never calls the methods of a value it reads from an
		// unexported field: it prints the fields by reflection.
		"in an unexported field":          unexported{v},
		"pointer in an unexported field":  unexported{ptr.Interface()},
		"pointer to an unexported holder": &unexported{v},
	}
}

// unexported holds a value where fmt cannot call its methods.
type unexported struct{ held any }

// printed is everything the printers make of v.
func printed(v any) []string {
	var out []string
	for _, verb := range Verbs {
		out = append(out, fmt.Sprintf(verb, v))
	}
	out = append(out, fmt.Sprint(v), fmt.Sprintln(v))
	for _, handler := range []func(io.Writer) slog.Handler{
		func(w io.Writer) slog.Handler { return slog.NewTextHandler(w, nil) },
		func(w io.Writer) slog.Handler { return slog.NewJSONHandler(w, nil) },
	} {
		for _, logIt := range []func(*slog.Logger){
			func(l *slog.Logger) { l.Info("secret", "value", v) },
			func(l *slog.Logger) { l.With("value", v).Info("secret") },
			func(l *slog.Logger) { l.Info("secret", slog.Group("group", "value", v)) },
		} {
			var buf bytes.Buffer
			logIt(slog.New(handler(&buf)))
			out = append(out, buf.String())
		}
	}
	return out
}
