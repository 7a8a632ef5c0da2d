// Package suggest finds the name a user probably meant, for "did you mean" hints.
package suggest

import "strings"

// Closest returns the option that name most likely misspells: one equal to it but for case,
// else the only option it begins (Source for SourceRegion), else the nearest by edit distance
// when that distance is small for the name's length. It returns "" when nothing is close.
func Closest(name string, options []string) string {
	for _, o := range options {
		if strings.EqualFold(o, name) {
			return o
		}
	}
	lower := strings.ToLower(name)
	var prefixed []string
	for _, o := range options {
		if len(name) >= 3 && strings.HasPrefix(strings.ToLower(o), lower) {
			prefixed = append(prefixed, o)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	best, bestDist := "", max(1, len(name)/3)+1
	for _, o := range options {
		if d := distance(lower, strings.ToLower(o)); d < bestDist {
			best, bestDist = o, d
		}
	}
	return best
}

// Hint is ` (did you mean X?)` for the closest option, or "" when nothing is close.
func Hint(name string, options []string) string {
	if c := Closest(name, options); c != "" {
		return " (did you mean " + c + "?)"
	}
	return ""
}

// distance is the edit distance between a and b, by bytes, where swapping two neighbours
// (the commonest typo) counts as one edit (optimal string alignment distance).
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
