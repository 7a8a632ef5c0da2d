// Package buildid names the build of the running binary for Temporal's worker versioning: a
// workflow run stays on the build that started it, so two binaries that may run workflow code
// or decode payloads differently must never share a build ID.
package buildid

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// revisionLength is how much of the VCS revision names a build: git's short hash.
const revisionLength = 12

// FromBinary returns the running binary's build ID (see Of), hashing the executable file only
// when its VCS stamp does not name the code.
func FromBinary() (string, error) {
	info, _ := debug.ReadBuildInfo()
	return Of(info, executableDigest)
}

// Of is the build ID of a binary with build info info: the VCS revision it was built from
// (`go build` in a git checkout stamps it) when its tree was clean; the revision and a digest
// of the executable when the tree was modified, since two modified builds of one revision may
// differ; the digest alone without a revision (`go test`, `-buildvcs=false`, a module build).
func Of(info *debug.BuildInfo, digest func() (string, error)) (string, error) {
	revision, modified := vcsStamp(info)
	if revision != "" && !modified {
		return revision, nil
	}
	sum, err := digest()
	if err != nil {
		return "", fmt.Errorf("build ID: %w", err)
	}
	if revision == "" {
		return "sha256-" + sum, nil
	}
	return revision + "-modified-" + sum, nil
}

func vcsStamp(info *debug.BuildInfo) (revision string, modified bool) {
	if info == nil {
		return "", false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value[:min(len(s.Value), revisionLength)]
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return revision, modified
}

// executableDigest is the start of the SHA-256 of the running executable's file.
func executableDigest() (string, error) {
	path, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the executable: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read the executable: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read the executable %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil))[:revisionLength], nil
}
