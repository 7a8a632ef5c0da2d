package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestImageBuildRefusesBadInputs: a SOURCE_DATE_EPOCH that is not seconds, and an ironflow
// binary that needs a C library the initramfs does not have, are refused before anything is
// fetched or written, each naming what is wrong.
func TestImageBuildRefusesBadInputs(t *testing.T) {
	tests := []struct {
		name, epoch string
		args        []string
		want        string
	}{
		{"epoch not seconds", "yesterday", nil, `SOURCE_DATE_EPOCH="yesterday"`},
		{"dynamic binary", "", []string{"--agent", "/bin/sh"}, "dynamically linked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envSourceDateEpoch, tt.epoch)
			// Packages given as files that do not exist: a refusal must come before them.
			args := append([]string{"image", "build", "--out", t.TempDir(), "--cache", t.TempDir(),
				"--kernel-deb", "/nonexistent/kernel.deb", "--busybox-deb", "/nonexistent/busybox.deb"}, tt.args...)
			root := newRootCommand()
			root.SetArgs(args)
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			err := root.Execute()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("image build %v = %v, want an error naming %q", args, err, tt.want)
			}
		})
	}
}
