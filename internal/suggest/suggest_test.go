package suggest

import "testing"

func TestClosest(t *testing.T) {
	options := []string{"Name", "Pool", "Rack", "SourceRegion", "TargetRegion", "region-a", "region-b"}
	tests := []struct{ name, want string }{
		{"name", "Name"},
		{"POOL", "Pool"},
		{"Sourceregion", "SourceRegion"},
		{"SourceRegon", "SourceRegion"},
		{"Rakc", "Rack"},
		{"region-c", "region-a"},
		{"Source", "SourceRegion"},
		{"colour", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Closest(tt.name, options); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := Hint("Nmae", []string{"Name"}); got != " (did you mean Name?)" {
		t.Errorf("Hint = %q", got)
	}
}
