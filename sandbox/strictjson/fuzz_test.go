package strictjson

import (
	"encoding/json"
	"testing"
)

// FuzzDecode: never panics; whatever it accepts, encoding/json accepts too
// and it contains no key outside the struct.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"name":"a","count":2,"tags":["x"]}`))
	f.Add([]byte(`{"Name":"a"}`))
	f.Add([]byte(`{"name":"a","name":"b"}`))
	f.Add([]byte(`{"name":"a"} {}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var d doc
		if err := Decode(data, &d, 1<<16); err != nil {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("accepted what encoding/json rejects: %v", err)
		}
		for k := range m {
			if k != "name" && k != "count" && k != "tags" {
				t.Fatalf("accepted unknown key %q", k)
			}
		}
	})
}
