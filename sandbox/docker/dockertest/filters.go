package dockertest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// filters is the decoded "filters" query parameter: term -> values.
type filters map[string][]string

// parseFilters decodes both encodings the engine accepts:
// {"label":{"a=b":true}} (what current clients send) and the legacy
// {"label":["a=b"]}.
func parseFilters(raw string) (filters, error) {
	if raw == "" {
		return filters{}, nil
	}
	var sets map[string]map[string]bool
	if err := json.Unmarshal([]byte(raw), &sets); err == nil {
		out := filters{}
		for term, vals := range sets {
			for v, on := range vals {
				if on {
					out[term] = append(out[term], v)
				}
			}
			slices.Sort(out[term])
		}
		return out, nil
	}
	var lists map[string][]string
	if err := json.Unmarshal([]byte(raw), &lists); err != nil {
		return nil, fmt.Errorf("invalid filter: %v", err)
	}
	return filters(lists), nil
}

// validate refuses terms outside allowed, as the engine does.
func (f filters) validate(allowed ...string) error {
	for term := range f {
		if !slices.Contains(allowed, term) {
			return fmt.Errorf("invalid filter '%s'", term)
		}
	}
	return nil
}

// matchLabels reports whether labels satisfy every "key" (present) or
// "key=value" (equal) term.
func matchLabels(terms []string, labels map[string]string) bool {
	for _, t := range terms {
		k, v, hasValue := strings.Cut(t, "=")
		got, ok := labels[k]
		if !ok || (hasValue && got != v) {
			return false
		}
	}
	return true
}

// matchAnyRegexp reports whether s matches any of the patterns, unanchored,
// as the engine's name filters do.
func matchAnyRegexp(patterns []string, s string) (bool, error) {
	for _, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return false, fmt.Errorf("invalid filter: %v", err)
		}
		if re.MatchString(s) {
			return true, nil
		}
	}
	return false, nil
}
