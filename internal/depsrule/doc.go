// Package depsrule holds no code: its tests enforce the arrows that must never exist between
// Ironflow's packages (see ARCHITECTURE.md), by asking `go list` for each package's
// dependencies, and that ARCHITECTURE.md's package map names every package.
package depsrule
