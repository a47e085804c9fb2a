package goodadmin

// Proto converts a thing.
func Proto(n int) int { return n }
