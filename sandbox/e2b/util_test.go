package e2b_test

import "fmt"

func sprint(v any) string { return fmt.Sprintf("%v %+v %#v", v, v, v) }
