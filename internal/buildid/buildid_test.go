package buildid

import (
	"errors"
	"os"
	"runtime/debug"
	"testing"
)

func TestOf(t *testing.T) {
	stamp := func(settings ...debug.BuildSetting) *debug.BuildInfo { return &debug.BuildInfo{Settings: settings} }
	revision := debug.BuildSetting{Key: "vcs.revision", Value: "7f70409c2b1d5e6f7a8b9c0d1e2f3a4b5c6d7e8f"}
	clean := debug.BuildSetting{Key: "vcs.modified", Value: "false"}
	modified := debug.BuildSetting{Key: "vcs.modified", Value: "true"}
	digest := func() (string, error) { return "0123456789ab", nil }
	tests := []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"clean tree", stamp(revision, clean), "7f70409c2b1d"},
		{"modified tree", stamp(revision, modified), "7f70409c2b1d-modified-0123456789ab"},
		{"no VCS stamp", stamp(), "sha256-0123456789ab"},
		{"no build info", nil, "sha256-0123456789ab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Of(tt.info, digest)
			if err != nil || got != tt.want {
				t.Errorf("Of = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := Of(stamp(revision, modified), func() (string, error) { return "", os.ErrPermission }); !errors.Is(err, os.ErrPermission) {
		t.Errorf("unreadable executable: got %v, want its error", err)
	}
}

// The test binary carries no VCS stamp: its ID is its file's digest, the same on every call.
func TestFromBinaryIsStable(t *testing.T) {
	first, err := FromBinary()
	if err != nil {
		t.Fatal(err)
	}
	second, err := FromBinary()
	if err != nil || second != first {
		t.Errorf("second call %q, %v; first %q", second, err, first)
	}
}
