package store

import (
	"strings"

	"github.com/ironflow/ironflow/region/api"
)

// tasks are keyed by Name, which may contain ":" (DRP's "stage:hello-world"); such a task is
// addressed as "Name:stage:hello-world".
var tasks = newKind(kind[api.Task]{
	name: api.KindTasks, noun: "task", table: "tasks",
	self:  func(t *api.Task) *string { return &t.Name },
	bare:  "name",
	keys:  map[string]string{"Name": "name = $1"},
	order: "name",
	columns: func(t *api.Task) []column {
		return []column{{"name", t.Name}}
	},
	prepare:  func(t, _ *api.Task) { emptyMeta(&t.Meta) },
	validate: func(t *api.Task) error { return validNamedScript("task", t.Name, t.TimeoutSeconds, t.Script) },
})

// validNamedScript checks a task or a commissioning script.
func validNamedScript(noun, name string, timeoutSeconds int, script string) error {
	if err := validName(noun, name, false); err != nil {
		return err
	}
	if timeoutSeconds < 0 {
		return invalidf("%s %s TimeoutSeconds %d is negative", noun, name, timeoutSeconds)
	}
	return validScript(noun+" "+name, script)
}

// validScript checks a script that PostgreSQL text and /bin/sh -c can both carry.
func validScript(noun, script string) error {
	if strings.TrimSpace(script) == "" {
		return invalidf("%s Script is empty", noun)
	}
	if i := strings.IndexByte(script, 0); i >= 0 {
		return invalidf("%s Script contains a NUL byte at offset %d", noun, i)
	}
	return nil
}

// taskKey is the key of the task named name, whatever characters the name holds.
func taskKey(name string) string { return "Name:" + name }
