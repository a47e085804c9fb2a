package filexfer

import (
	"testing"
)

// fuzzNames are the name and link pieces the fuzzer combines: enough to
// reach every rule, few enough to collide.
var fuzzNames = []string{"a", "b", "..", ".", "l", "", "/", "out", "x", "/workspace", "/etc", "a/b", "../outside"}

// decodeSteps turns fuzz bytes into at most eight steps.
func decodeSteps(data []byte) []step {
	var steps []step
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	piece := func() string {
		n := int(next()%3) + 1
		s := ""
		for i := range n {
			if i > 0 {
				s += "/"
			}
			s += fuzzNames[int(next())%len(fuzzNames)]
		}
		return s
	}
	for len(data) > 0 && len(steps) < 8 {
		kind := Kind(next() % 6)
		e := Entry{Name: piece(), Kind: kind, Mode: ModeFromUnix(uint32(next()) << 4)}
		if kind == KindSymlink || kind == KindHardlink {
			e.Link = piece()
		}
		size := int(next() % 8)
		if kind == KindFile {
			e.Size = int64(size)
		}
		d := make([]byte, int(next()%10))
		steps = append(steps, step{e: e, data: string(d), writeOnly: next()%7 == 0})
	}
	return steps
}

func FuzzWriter(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 3, 3})
	f.Add([]byte{3, 0, 4, 0, 1, 2, 1, 0, 1, 0, 0, 4, 1, 7, 1, 1})
	f.Add([]byte{1, 1, 7, 2, 0, 0, 2, 2, 4, 1, 0, 3, 3, 4, 1, 0, 3, 3})
	f.Add([]byte{4, 0, 12, 0, 0, 1, 0, 12, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newSandbox(t)
		mustSymlink(t, "../outside", s.root+"/out")
		mustSymlink(t, s.outside, s.root+"/abs")
		before := s.outsideHash(t)
		w, err := NewWriter(WriterConfig{Root: s.root, OpID: "fuzz", Limits: Limits{MaxFileBytes: 6, MaxEntries: 6}})
		if err != nil {
			t.Fatal(err)
		}
		_ = apply(w, decodeSteps(data))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if s.outsideHash(t) != before {
			t.Fatal("something outside the root changed")
		}
		if left := s.temps(t); len(left) != 0 {
			t.Fatalf("temporary files left: %v", left)
		}
	})
}
