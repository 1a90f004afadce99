package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/apply"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/httpapi"
	"github.com/mailhook/mailhook/internal/serve"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// onCallEnv is a database holding one hard-bounced message (its recipient suppressed by it) with
// a notification its sink refused once, the command pointed at it, and the /v1 API over the
// same database on a real HTTP server, to compare the command's answers with the API's.
func onCallEnv(t *testing.T) (api *httptest.Server, token string) {
	t.Helper()
	dbURL := storetest.NewDatabase(t)
	t.Setenv("MAILHOOK_CONFIG", "")
	t.Setenv("DATABASE_URL", dbURL)
	opts, err := serve.StoreOptions(config.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), dbURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	ctx := t.Context()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for i, ev := range []domain.Event{
		{Provider: "postscale", EventID: "evt_sent", Type: "email.accepted", Kind: domain.KindStatus, Status: domain.StatusAccepted,
			MessageID: "msg_oncall", Recipient: "Jane.Doe@Example.com", OccurredAt: at, Raw: json.RawMessage(`{}`)},
		{Provider: "postscale", EventID: "evt_bounce", Type: "email.bounced", Kind: domain.KindStatus, Status: domain.StatusBounced,
			BounceType: domain.BounceHard, MessageID: "msg_oncall", Recipient: "Jane.Doe@Example.com", OccurredAt: at.Add(time.Minute),
			Bounce: &domain.Bounce{SMTPCode: 550, EnhancedCode: "5.1.1", Diagnostic: "550 5.1.1 <jane.doe@example.com>: no such user",
				Category: "unknown_user"}, Raw: json.RawMessage(`{}`)},
	} {
		if _, err := st.Events.RecordEvent(ctx, ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if _, err := st.Events.ApplyStatus(ctx, ev, apply.Rules{}); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	n, err := st.Notifications.EnsureNotification(ctx, delivery.Notification{Provider: "postscale", EventID: "evt_bounce",
		Sink: "crm", Type: domain.TypeStatusChanged, Body: json.RawMessage(`{"type":"message.status_changed"}`),
		MessageID: "msg_oncall", Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Notifications.RecordNotificationAttempt(ctx, n.ID, "POST http://crm/: 503 Service Unavailable"); err != nil {
		t.Fatal(err)
	}

	token = "on-call-test-token"
	srv := &httpapi.Server{Messages: st.Messages, Suppressions: st.Suppressions, AdminTokens: map[string]string{token: "ops"},
		Log: slog.New(slog.DiscardHandler), Now: time.Now}
	api = httptest.NewServer(srv.Handler())
	t.Cleanup(api.Close)
	return api, token
}

// runCLI runs mailhook with args and returns its stdout and error.
func runCLI(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out strings.Builder
	c := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
	c.SetArgs(args)
	c.SetIn(strings.NewReader(stdin))
	c.SetOut(&out)
	c.SetErr(io.Discard)
	err := c.Execute()
	return out.String(), err
}

// getJSON is the /v1 answer to a request, decoded, and its status.
func getJSON(t *testing.T, api *httptest.Server, token, method, path, body string) (int, any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, api.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, v
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return v
}

// "Why did this message bounce": mailhook messages get answers what GET /v1/messages answers
// (--format json, the same document), and its table names the category, the SMTP code, the
// diagnostic, each event and the notification with its error. An unknown message exits 4.
func TestMessagesGetAnswersAsTheAPI(t *testing.T) {
	api, token := onCallEnv(t)
	out, err := runCLI(t, "", "messages", "get", "postscale", "msg_oncall", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	status, want := getJSON(t, api, token, "GET", "/v1/messages/postscale/msg_oncall", "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/messages: %d %v", status, want)
	}
	if got := decode(t, out); !jsonEqual(got, want) {
		t.Errorf("messages get --format json:\n%s\nGET /v1/messages:\n%v", out, want)
	}
	notes, _ := want.(map[string]any)["notifications"].([]any)
	if len(notes) != 1 || notes[0].(map[string]any)["last_error"] != "POST http://crm/: 503 Service Unavailable" {
		t.Errorf("GET /v1/messages notifications: %v, want the crm one with its error", notes)
	}

	out, err = runCLI(t, "", "messages", "get", "postscale", "msg_oncall")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bounced (hard), version 2", "unknown_user, SMTP 550 5.1.1", "no such user",
		"evt_sent", "evt_bounce", "suppressed the recipient", "crm", "message.status_changed",
		"last error: POST http://crm/: 503 Service Unavailable"} {
		if !strings.Contains(out, want) {
			t.Errorf("messages get does not show %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "evt_sent") > strings.Index(out, "evt_bounce") {
		t.Errorf("events out of the order received:\n%s", out)
	}

	_, err = runCLI(t, "", "messages", "get", "postscale", "msg_nope")
	if code := exitCode(err); code != exitNotFound {
		t.Errorf("messages get of an unknown message: %v, exit %d, want %d", err, code, exitNotFound)
	}
	for _, args := range [][]string{{"messages", "get", "postscale"}, {"messages", "get", "postscale", "msg_oncall", "--format", "csv"}} {
		if _, err := runCLI(t, "", args...); exitCode(err) != exitUsage {
			t.Errorf("%v: %v, want exit %d", args, err, exitUsage)
		}
	}
}

// "Is this address suppressed": check, list and lift answer as /v1/suppressions does, through
// the same store; the address is normalized as the API normalizes it, and may come on stdin.
func TestSuppressionsCommandsAnswerAsTheAPI(t *testing.T) {
	api, token := onCallEnv(t)
	out, err := runCLI(t, "", "suppressions", "check", "JANE.DOE@example.com", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	_, want := getJSON(t, api, token, "GET", "/v1/suppressions/check?address=jane.doe@example.com", "")
	if got := decode(t, out); !jsonEqual(got, want) || want.(map[string]any)["suppressed"] != true {
		t.Errorf("suppressions check --format json:\n%s\nGET /v1/suppressions/check: %v", out, want)
	}
	out, err = runCLI(t, "jane.doe@example.com\n", "suppressions", "check", "-")
	if err != nil || !strings.Contains(out, "jane.doe@example.com: SUPPRESSED for scope global (hard_bounce)") ||
		!strings.Contains(out, "postscale:evt_bounce (message msg_oncall)") {
		t.Errorf("suppressions check -: %v\n%s", err, out)
	}

	out, err = runCLI(t, "", "suppressions", "list", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	if _, want := getJSON(t, api, token, "GET", "/v1/suppressions", ""); !jsonEqual(decode(t, out), want) {
		t.Errorf("suppressions list --format json:\n%s\nGET /v1/suppressions: %v", out, want)
	}
	for _, args := range [][]string{{"suppressions", "list", "--reason", "bored"}, {"suppressions", "list", "--limit", "0"},
		{"suppressions", "check", "x@example.com", "--scope", "Bad Scope"}, {"suppressions", "lift", "jane.doe@example.com"}} {
		if _, err := runCLI(t, "", args...); exitCode(err) != exitUsage {
			t.Errorf("%v: %v, want exit %d", args, err, exitUsage)
		}
	}

	out, err = runCLI(t, "", "suppressions", "lift", "jane.doe@example.com", "--reason", "mailbox exists again", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	lift := decode(t, out).(map[string]any)
	if lift["lift_reason"] != "mailbox exists again" || lift["reason"] != domain.ReasonHardBounce || !strings.HasPrefix(lift["lifted_by"].(string), "cli") {
		t.Errorf("suppressions lift: %s", out)
	}
	if _, now := getJSON(t, api, token, "GET", "/v1/suppressions/check?address=jane.doe@example.com", ""); now.(map[string]any)["suppressed"] != false {
		t.Errorf("after the lift the API still says %v", now)
	}
	_, err = runCLI(t, "", "suppressions", "lift", "jane.doe@example.com", "--reason", "again")
	if code := exitCode(err); code != exitNotFound {
		t.Errorf("lifting what is not suppressed: %v, exit %d, want %d", err, code, exitNotFound)
	}
}

// jsonEqual compares two decoded JSON documents.
func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
