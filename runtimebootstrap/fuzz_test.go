package runtimebootstrap

import (
	"os"
	"strings"
	"testing"
)

// FuzzDecode feeds arbitrary documents to the strict decoder: it must never
// panic, a document it accepts must validate and re-encode to a document
// it accepts again, and its errors must never carry the credential.
func FuzzDecode(f *testing.F) {
	if golden, err := os.ReadFile("testdata/valid.json"); err == nil {
		f.Add(golden)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"version":1,"core_url":"https://c.test","device_id":"6f1c2f5e-3a4b-4c5d-8e9f-0a1b2c3d4e5f","credential":"x"}`))
	f.Add([]byte(`{"Version":1}`))
	f.Add([]byte(`{"version":1,"version":1}`))
	f.Add([]byte("\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Decode(data)
		if err != nil {
			if c := credentialIn(data); len(c) >= 8 && strings.Contains(err.Error(), c) {
				t.Fatalf("error carries the credential: %v", err)
			}
			return
		}
		if err := file.Validate(); err != nil {
			t.Fatalf("accepted an invalid file: %v", err)
		}
		again, err := Encode(file)
		if err != nil {
			t.Fatalf("cannot re-encode an accepted file: %v", err)
		}
		if _, err := Decode(again); err != nil {
			t.Fatalf("re-encoded file rejected: %v", err)
		}
	})
}

// credentialIn returns the text after a "credential" key, roughly, for the
// leak check.
func credentialIn(data []byte) string {
	s := string(data)
	i := strings.Index(s, `"credential":"`)
	if i < 0 {
		return ""
	}
	rest := s[i+len(`"credential":"`):]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return rest
}
