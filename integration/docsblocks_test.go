package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The markers a docs file puts on the line before a command block: skip it (a block that
// cannot run on the dev stack, whose text says why), or run it after the stack was stopped.
const (
	skipMarker      = "<!-- readme-test: skip"
	afterStopMarker = "<!-- docs-test: after-stop"
)

// docsCommand is one command of a docs file and, in a console block, the output it shows.
type docsCommand struct {
	file     string
	line     int
	text     string
	shown    string
	hasShown bool
}

func (c docsCommand) where() string { return c.file + ":" + strconv.Itoa(c.line) }

type docsBlock struct {
	commands  []docsCommand
	afterStop bool
}

// docsFiles is the order in which the docs test runs the docs: the README's tour, then the
// files of docs/ in the order of their index, docs/README.md. Every docs/*.md must be in it.
func docsFiles(t *testing.T, clone string) []string {
	t.Helper()
	index, err := os.ReadFile(filepath.Join(clone, "docs", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`\]\(([a-z-]+\.md)\)`).FindAllStringSubmatch(string(index), -1) {
		if name := "docs/" + m[1]; !seen[name] {
			seen[name] = true
			files = append(files, name)
		}
	}
	all, err := filepath.Glob(filepath.Join(clone, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range all {
		if name := "docs/" + filepath.Base(path); name != "docs/README.md" && !seen[name] {
			t.Errorf("%s is not linked from docs/README.md: the docs test would not run its commands", name)
		}
	}
	return files
}

// readDocsBlocks reads the ```sh and ```console blocks of a docs file, but those after a skip
// marker.
func readDocsBlocks(t *testing.T, clone, file string) []docsBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(clone, file))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docsBlock
	lines := strings.Split(string(b), "\n")
	skip, afterStop := false, false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, skipMarker):
			skip = true
			continue
		case strings.HasPrefix(line, afterStopMarker):
			afterStop = true
			continue
		case !strings.HasPrefix(line, "```"):
			continue
		}
		lang := strings.TrimPrefix(line, "```")
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
			end++
		}
		if (lang == "sh" || lang == "console") && !skip {
			blk := parseDocsBlock(file, lang == "console", lines[i+1:end], i+2)
			blk.afterStop = afterStop
			blocks = append(blocks, blk)
		}
		skip, afterStop = false, false
		i = end
	}
	return blocks
}

func parseDocsBlock(file string, console bool, lines []string, firstLine int) docsBlock {
	var b docsBlock
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if console && !strings.HasPrefix(line, "$ ") {
			if n := len(b.commands); n > 0 {
				b.commands[n-1].shown += line + "\n"
			}
			continue
		}
		if !console && (strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		c := docsCommand{file: file, line: firstLine + i, text: strings.TrimPrefix(line, "$ "), hasShown: console}
		for strings.HasSuffix(c.text, `\`) && i+1 < len(lines) {
			i++
			c.text += "\n" + lines[i]
		}
		b.commands = append(b.commands, c)
	}
	return b
}

var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// uuidNames pairs the UUIDs the docs show with the ones the stack made: a rack's, an
// enlisted or created machine's UUID is new on every stack. A docs UUID stands for one UUID of
// the stack from its first appearance on, and the seed's fixed ones stand for themselves.
type uuidNames struct{ toActual, toDocs map[string]string }

func newUUIDNames() *uuidNames {
	return &uuidNames{toActual: map[string]string{}, toDocs: map[string]string{}}
}

// actual puts the stack's UUIDs where a command names the docs' ones.
func (u *uuidNames) actual(s string) string {
	return uuidPattern.ReplaceAllStringFunc(s, func(id string) string {
		if a, ok := u.toActual[id]; ok {
			return a
		}
		return id
	})
}

// match reports whether got (the stack's output) is shown (the docs'), with each UUID of
// shown standing for the UUID in the same place of got, consistently with the pairs before;
// only a match records its new pairs.
func (u *uuidNames) match(got, shown string) bool {
	gotIDs, shownIDs := uuidPattern.FindAllString(got, -1), uuidPattern.FindAllString(shown, -1)
	if len(gotIDs) != len(shownIDs) || uuidPattern.ReplaceAllString(got, "<uuid>") != uuidPattern.ReplaceAllString(shown, "<uuid>") {
		return false
	}
	pairs, reverse := map[string]string{}, map[string]string{}
	for i, d := range shownIDs {
		a := gotIDs[i]
		if known, ok := u.toActual[d]; ok && known != a {
			return false
		}
		if known, ok := u.toDocs[a]; ok && known != d {
			return false
		}
		if known, ok := pairs[d]; ok && known != a {
			return false
		}
		if known, ok := reverse[a]; ok && known != d {
			return false
		}
		pairs[d], reverse[a] = a, d
	}
	for d, a := range pairs {
		u.toActual[d], u.toDocs[a] = a, d
	}
	return true
}

func TestUUIDNamesPairTheDocsUUIDsWithTheStacksOnce(t *testing.T) {
	const docRack, docWeb = "6ded5dda-dc54-45c8-871a-e53757dcc322", "9fd31c6c-ca82-442c-85a5-7bb809f7f82b"
	const rack, web, other = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222", "33333333-3333-4333-8333-333333333333"
	u := newUUIDNames()
	if !u.match("rack-a "+rack+" web-07 "+web, "rack-a "+docRack+" web-07 "+docWeb) {
		t.Fatal("the first appearance of the docs' UUIDs did not pair them")
	}
	if got := u.actual("jobs list Machine=" + docWeb); got != "jobs list Machine="+web {
		t.Errorf("a command naming the docs' UUID runs as %q", got)
	}
	if u.match("rack-a "+other, "rack-a "+docRack) {
		t.Error("a docs UUID stood for a second UUID of the stack")
	}
	if u.match("web-08 "+web, "web-08 "+"44444444-4444-4444-8444-444444444444") {
		t.Error("a second docs UUID stood for a UUID the docs already name")
	}
	if u.match("a "+other+" b "+other, "a "+docRack+" c "+docRack) {
		t.Error("outputs that differ outside their UUIDs matched")
	}
	if u.match("x "+other+" "+other, "x 55555555-5555-4555-8555-555555555555 66666666-6666-4666-8666-666666666666") {
		t.Error("two docs UUIDs in one output stood for one UUID of the stack")
	}
	if _, paired := u.toActual["55555555-5555-4555-8555-555555555555"]; paired {
		t.Error("an output that did not match recorded a pair")
	}
}

func TestDocsBlocksSkipAndAfterStopMarkers(t *testing.T) {
	dir := t.TempDir()
	doc := "text\n```console\n$ echo a\na\n```\n" + skipMarker + " (why) -->\n```sh\nfalse\n```\n" +
		afterStopMarker + " (why) -->\n```sh\nmake dev-clean\n```\n```yaml\nnot: run\n```\n"
	if err := os.WriteFile(filepath.Join(dir, "x.md"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks := readDocsBlocks(t, dir, "x.md")
	if len(blocks) != 2 {
		t.Fatalf("%d blocks, want the console one and the after-stop one: %+v", len(blocks), blocks)
	}
	if c := blocks[0].commands[0]; c.text != "echo a" || c.shown != "a\n" || !c.hasShown || blocks[0].afterStop {
		t.Errorf("console block read as %+v", blocks[0])
	}
	if c := blocks[1].commands[0]; c.text != "make dev-clean" || !blocks[1].afterStop {
		t.Errorf("after-stop block read as %+v", blocks[1])
	}
}
