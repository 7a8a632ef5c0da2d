package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ironflow/ironflow/dev/temporalserver"
	"github.com/ironflow/ironflow/internal/payloadcodec"
	"github.com/ironflow/ironflow/region/tickets"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// codecNamespace holds the runs of the encryption tests: their worker decodes payloads the
// shared workers of the other namespaces could not.
const codecNamespace = "ironflow-codec"

// writePayloadKeys writes a key file of two keys, current first, and points the CLI at it.
func writePayloadKeys(t *testing.T) *payloadcodec.Codec {
	t.Helper()
	var lines strings.Builder
	for _, id := range []string{"k2", "k1"} {
		lines.WriteString(id + ":" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte(id[1:]), payloadcodec.KeySize)) + "\n")
	}
	path := filepath.Join(t.TempDir(), "payload.keys")
	if err := os.WriteFile(path, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("IRONFLOW_PAYLOAD_KEYS", path)
	codec, err := payloadcodec.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return codec
}

// temporalCLI runs the Temporal CLI against the shared dev server's codec namespace and
// returns its JSON output followed by the data of every payload in it, which the CLI shows
// in base64.
func temporalCLI(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := temporalserver.FindCLI()
	if err != nil {
		t.Fatal(err)
	}
	args = append(args, "--address", shared.server.Address, "--namespace", codecNamespace)
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("temporal %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	text := []string{string(out)}
	for _, data := range jsonFields(t, string(out), "data") {
		if b, err := base64.StdEncoding.DecodeString(data); err == nil {
			text = append(text, string(b))
		}
	}
	return strings.Join(text, "\n")
}

// sealedBulkRun runs a bulk migration to its end and creates a schedule of the same name,
// both with encrypted payloads, and returns the setup, the name and the bulk run's grant.
func sealedBulkRun(t *testing.T) (*bulkSetup, *payloadcodec.Codec, string, string) {
	temporalEnv(t)
	if err := registerNamespace(shared.server.Address, codecNamespace); err != nil {
		t.Fatal(err)
	}
	codec := writePayloadKeys(t)
	s := newBulkSetupIn(t, codecNamespace, codec.DataConverter(), 2, 0)

	name := "sealed-" + uuid.NewString()
	code, _, stderr := ironflow(t, "", "migrations", "bulk", "--name", name, "--from", "region-a", "--to", "region-b", "--pool", s.pool, "--wait")
	if code != 0 {
		t.Fatalf("bulk: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = ironflow(t, "", "migrations", "schedule", "create", name, "--cron", "0 2 * * *", "--from", "region-a", "--to", "region-b", "--pool", s.pool)
	if code != 0 {
		t.Fatalf("schedule create: exit %d, stderr %q", code, stderr)
	}
	t.Cleanup(func() { ironflow(t, "", "migrations", "schedule", "delete", name) })

	// The grant, read back through the codec as the worker reads it.
	events := s.tc.GetWorkflowHistory(context.Background(), workflows.BulkMigrateID(name), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	first, err := events.Next()
	if err != nil {
		t.Fatal(err)
	}
	var in workflows.BulkMigrateInput
	if err := codec.DataConverter().FromPayloads(first.GetWorkflowExecutionStartedEventAttributes().GetInput(), &in); err != nil || in.Grant == "" {
		t.Fatalf("input %+v (%v), want one with a grant", in, err)
	}
	return s, codec, name, in.Grant
}

// TestTemporalStoresGrantsEncrypted: what the CLI and the workers hand to Temporal is
// ciphertext, so whoever reads the namespace (the Temporal CLI without the codec, the
// server's database) finds no grant to start a move with; the codec endpoint shows it to an
// admin of the region, and to nobody else.
func TestTemporalStoresGrantsEncrypted(t *testing.T) {
	s, codec, name, grant := sealedBulkRun(t)
	id := workflows.BulkMigrateID(name)
	region := os.Getenv(envEndpoint)

	history := temporalCLI(t, "workflow", "show", "--workflow-id", id, "--output", "json")
	schedule := temporalCLI(t, "schedule", "describe", "--schedule-id", id, "--output", "json")
	for what, out := range map[string]string{"history": history, "schedule": schedule} {
		if strings.Contains(out, grant) || strings.Contains(out, s.pool) {
			t.Errorf("the %s as Temporal stores it shows the grant or the input in clear:\n%s", what, out)
		}
	}

	endpoint := httptest.NewServer(&payloadcodec.Endpoint{Codec: codec, Region: region, Logger: cliLogger(newRootCommand())})
	t.Cleanup(endpoint.Close)
	decoded := temporalCLI(t, "workflow", "show", "--workflow-id", id, "--output", "json", "--codec-endpoint", endpoint.URL, "--codec-auth", "Bearer "+adminToken)
	if !strings.Contains(decoded, grant) {
		t.Errorf("the history decoded for an admin does not show the grant:\n%s", decoded)
	}
	for token, want := range map[string]int{adminToken: http.StatusOK, "operator-token": http.StatusForbidden, readonlyToken: http.StatusForbidden, "": http.StatusUnauthorized} {
		req, err := http.NewRequest(http.MethodPost, endpoint.URL+"/decode", strings.NewReader(`{"payloads":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("decode with token %q: HTTP %d, want %d", token, resp.StatusCode, want)
		}
	}
}

// TestCLINeverPrintsAGrant: every output that shows a move's input shows its grant's ID,
// user and expiry, never the token, which would let its reader start moves until it expires.
func TestCLINeverPrintsAGrant(t *testing.T) {
	_, _, name, grant := sealedBulkRun(t)
	claims, err := tickets.ParseGrant(grant)
	if err != nil {
		t.Fatal(err)
	}
	_, signature, _ := strings.Cut(grant, ".")
	id := workflows.BulkMigrateID(name)
	code, out, stderr := ironflow(t, "", "migrations", "list")
	if code != 0 {
		t.Fatalf("list: exit %d, %s", code, stderr)
	}
	var batch string
	for _, r := range decode[[]moves.Run](t, out) {
		if strings.HasPrefix(r.WorkflowID, id+"/batch/") {
			batch = r.WorkflowID
		}
	}
	if batch == "" {
		t.Fatalf("no batch of %s listed: %s", id, out)
	}
	shown := map[string][]string{}
	for _, format := range []string{"json", "yaml", "table"} {
		for _, args := range [][]string{
			{"migrations", "schedule", "list"},
			{"migrations", "show", id},
			{"migrations", "show", batch},
		} {
			code, out, stderr := ironflow(t, "", append(args, "-o", format)...)
			if code != 0 {
				t.Fatalf("%v: exit %d, %s", args, code, stderr)
			}
			if strings.Contains(out+stderr, signature) || strings.Contains(out+stderr, grant) {
				t.Errorf("%v -o %s prints the grant's secret:\n%s%s", args, format, out, stderr)
			}
			shown[format] = append(shown[format], out)
		}
	}
	// Every grant in the JSON outputs (the schedule's own included) shows as its ID, user and
	// expiry only; the bulk run's is the one its shows name.
	shape := regexp.MustCompile(`^\[redacted\] grant \S+ to \S+, expires \S+$`)
	for i, out := range shown["json"] {
		grants := jsonFields(t, out, "Grant")
		if len(grants) == 0 {
			t.Errorf("json output shows no grant:\n%s", out)
		}
		for _, g := range grants {
			if !shape.MatchString(g) {
				t.Errorf("json output shows grant %q, want its ID, user and expiry only", g)
			}
		}
		if want := moves.RedactGrant(grant); i > 0 && !slices.Contains(grants, want) {
			t.Errorf("json output does not name the grant as %q (ID %s, user %s):\n%s", want, claims.ID, claims.GrantedTo, out)
		}
	}
}

// jsonFields are the string values of every field named key in the JSON document out.
func jsonFields(t *testing.T, out, key string) []string {
	t.Helper()
	var doc any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	var values []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if s, ok := v[key].(string); ok {
				values = append(values, s)
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	return values
}

// TestCodecServeRefusesBadKeys: the endpoint does not start without a key file it may use.
func TestCodecServeRefusesBadKeys(t *testing.T) {
	t.Setenv("IRONFLOW_PAYLOAD_KEYS", "")
	loose := filepath.Join(t.TempDir(), "payload.keys")
	if err := os.WriteFile(loose, []byte("k:"+base64.StdEncoding.EncodeToString(make([]byte, payloadcodec.KeySize))+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--payload-keys (env IRONFLOW_PAYLOAD_KEYS) is required"},
		{[]string{"--payload-keys", loose}, "lets others read the keys; chmod 600 it"},
	} {
		code, _, stderr := ironflow(t, "", append([]string{"codec", "serve", "--listen", "127.0.0.1:0"}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("codec serve %v: exit %d, stderr %q; want %q", c.args, code, stderr, c.want)
		}
	}
}
