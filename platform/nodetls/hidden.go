package nodetls

// hidden keeps a secret out of fmt. String and Format redact a value printed
// directly, but fmt prints a struct held in an unexported field by
// reflection, without calling its methods, and even a pointer field is
// followed for a mismatched verb (%s of a pointer prints what it points to).
// A func value prints as an address under every verb, so secrets are stored
// behind one.
type hidden[T any] func() T

func hide[T any](v T) hidden[T] { return func() T { return v } }
