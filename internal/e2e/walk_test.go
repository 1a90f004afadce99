package e2e_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The goal "a new user finds why a given address bounced, from the console alone": Chromium
// walks from the sign-in page to the bounce through what the pages say (testdata/walk.cjs: the
// menu, the recipient field, the message whose status says bounced), among the address's other
// messages, one of them newer and delivered. The steps and their times are logged, never
// asserted (docs/operations/console.md, "Why did an address bounce?").
func TestANewUserFindsWhyAnAddressBounced(t *testing.T) {
	node, chromium, nodePath := browserTools(t)
	h := newHarness(t, harnessOptions{})
	address := "walk." + h.prefix + "@example.org"
	// Neutral ids: the list must tell them apart by what it says of each, not by their names.
	bounced, delivered := h.id("msg_walk_a"), h.id("msg_walk_b")
	base := time.Now().Add(-time.Hour)
	send := func(msg, typ string, at time.Time, extra string) {
		t.Helper()
		body := fmt.Sprintf(`{"id":%q,"type":%q,"created_at":%q,"data":{"email_id":%q,"from":"hello@app.example","to":%q,"subject":"Hi"%s}}`,
			h.id("evt_"+msg+"_"+typ), typ, at.UTC().Format(time.RFC3339), msg, address, extra)
		if code, out := h.post(body); code != http.StatusOK {
			t.Fatalf("%s %s: %d %v", msg, typ, code, out)
		}
	}
	send(bounced, "email.sent", base, "")
	send(bounced, "email.bounced", base.Add(time.Minute), `,"bounce_type":"hard","diagnostic":"550 5.1.1 user unknown"`)
	// An open after the bounce (as simulate sends): the message's latest event is not the bounce,
	// so only its status tells it from the others.
	send(bounced, "email.opened", base.Add(2*time.Minute), "")
	send(delivered, "email.sent", base.Add(10*time.Minute), "")
	send(delivered, "email.delivered", base.Add(11*time.Minute), "")
	h.waitCond("both messages settled", func() (int64, bool) {
		_, b := h.message(bounced)
		_, d := h.message(delivered)
		return int64(b.Version + d.Version), b.Status == "bounced" && b.Opens == 1 && d.Status == "delivered"
	})

	cmd := exec.CommandContext(t.Context(), node, "testdata/walk.cjs", h.api.URL, adminToken, address)
	cmd.Env = append(cmd.Environ(), "NODE_PATH="+nodePath, "CHROMIUM="+chromium)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("the walk:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("the walk failed: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "opened: "+bounced+"\n") {
		t.Errorf("the walk opened another message than %s:\n%s", bounced, out)
	}
	for _, want := range []string{"status bounced (hard)", "unknown_user", "SMTP 550 5.1.1", "550 5.1.1 user unknown"} {
		if !strings.Contains(out, want) {
			t.Errorf("the page the walk ended on does not say %q:\n%s", want, out)
		}
	}
}
