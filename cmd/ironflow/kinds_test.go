package main

import (
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// kindsWithoutNoun are the kinds of region/api.Kinds the CLI has no noun for, and why.
var kindsWithoutNoun = map[string]string{
	api.KindTasks: "tasks are the scripts agents fetch; they are managed through the API",
}

// TestEveryKindHasANoun: every kind of region/api.Kinds is a command of its name (a noun[T],
// nouns.go), unless kindsWithoutNoun says why not.
func TestEveryKindHasANoun(t *testing.T) {
	commands := map[string]bool{}
	for _, c := range newRootCommand().Commands() {
		commands[c.Name()] = true
	}
	for _, k := range api.Kinds {
		_, exempt := kindsWithoutNoun[k.Name]
		if commands[k.Name] == exempt {
			t.Errorf("kind %s: command %v, exempt %v (kindsWithoutNoun)", k.Name, commands[k.Name], exempt)
		}
	}
}
