package sandbox

import "errors"

// ProbeError is a failed readiness check with a fixed diagnostic code that
// a node reports for its generation (for example "engine_unreachable",
// "image_missing"). It never carries native text.
type ProbeError struct {
	Code string
}

func (e *ProbeError) Error() string { return "probe: " + e.Code }

// ProbeCode returns the diagnostic code of a ProbeError in err's chain, or ""
// when there is none.
func ProbeCode(err error) string {
	var pe *ProbeError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
