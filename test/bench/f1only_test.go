package bench

import "testing"

func TestF1Only(t *testing.T) {
	r := newRig(t, true)
	rows := r.filesRows(3)
	for _, x := range rows {
		x.summarize()
		t.Logf("%s berth %v baseline %v ratio %.2f", x.ID, x.BerthMS, x.BaselineMS, x.Ratio)
	}
}
