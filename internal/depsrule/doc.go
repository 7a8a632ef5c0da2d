// Package depsrule holds no code: its test enforces the arrows that must never exist between
// Ironflow's packages (see ARCHITECTURE.md), by asking `go list` for each package's
// dependencies.
package depsrule
