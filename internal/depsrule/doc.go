// Package depsrule holds no code: its tests enforce the arrows that must never exist between
// Ironflow's packages (see ARCHITECTURE.md), by asking `go list` for each package's
// dependencies, that only region/client builds HTTP requests (by type-checking every package's
// files against the export data `go list -export` builds, as go vet does), and that
// ARCHITECTURE.md's package map names every package.
package depsrule
