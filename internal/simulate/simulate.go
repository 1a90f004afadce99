// Package simulate sends correctly signed sample webhooks to a running mailhook, as Postscale or
// another provider (Providers) writes and signs them: one message's lifecycle out of order and
// with duplicates (Postscale's with an inbound email), then reads the message back from the API
// so a new user sees the whole pipeline work.
package simulate

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/provider/postscale"
	"github.com/mailhook/mailhook/internal/signature"
)

// Options says where to send and how to sign.
type Options struct {
	BaseURL  string // e.g. http://127.0.0.1:8000
	Endpoint string // endpoint name, e.g. postscale
	// Provider is the endpoint's provider, whose payloads and signature are sent (Providers);
	// empty is postscale.
	Provider string
	Secret   string
	// Key signs for a provider that signs with a private key (NeedsKey: sendgrid).
	Key *ecdsa.PrivateKey
	// Generic is the endpoint's generic: block, from which a provider whose payloads are the
	// sender's own (NeedsMapping: hmac, standard-webhooks) is written and, for hmac, signed.
	Generic *config.Generic
	Token   string        // admin API bearer token, to read the message back
	Wait    time.Duration // how long to wait for the message to settle
	Client  *http.Client
	Out     io.Writer
}

// Recipient is the simulated message's recipient, whom its hard bounce suppresses.
const Recipient = "user@example.com"

// Step is one request the simulation sends.
type Step struct {
	Name string
	Body []byte
	// ID is the event's id where the provider sends it beside the body (Resend's svix-id).
	ID string
}

// Lifecycle returns a message's events in a deliberately wrong order with a duplicate, and an
// inbound email. The final status must be bounced (hard) whatever the arrival order.
func Lifecycle(messageID, inboundID string, base time.Time) []Step {
	env := func(id, typ string, at time.Time, extra string) []byte {
		return []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created_at":%q,"data":{"email_id":%q,"from":"hello@yourapp.example","to":%q,"subject":"Welcome!"%s}}`,
			id, typ, at.UTC().Format(time.RFC3339), messageID, Recipient, extra))
	}
	sent := env("evt_"+messageID+"_sent", "email.sent", base, "")
	delivered := env("evt_"+messageID+"_delivered", "email.delivered", base.Add(2*time.Second),
		fmt.Sprintf(`,"delivered_at":%q`, base.Add(2*time.Second).UTC().Format(time.RFC3339)))
	opened := env("evt_"+messageID+"_opened", "email.opened", base.Add(time.Minute), "")
	bounced := env("evt_"+messageID+"_bounced", "email.bounced", base.Add(10*time.Minute),
		`,"bounce_type":"hard","diagnostic":"550 5.1.1 user unknown"`)
	inbound := []byte(fmt.Sprintf(`{"event":"email.received","timestamp":%q,"email_id":%q,"message_id":"<%s@example.com>","from":"customer@example.com","to":"support@yourapp.example","subject":"Help with my order","text":"Hello!","html":"<p>Hello!</p>","headers":[{"name":"Message-ID","value":"<%s@example.com>"}],"attachments":[],"spf":"pass","dkim":"pass"}`,
		base.UTC().Format(time.RFC3339), inboundID, inboundID, inboundID))
	return []Step{
		{"email.delivered (arrives before sent)", delivered, ""},
		{"email.bounced (a delayed DSN)", bounced, ""},
		{"email.sent (late)", sent, ""},
		{"email.delivered (provider retry: duplicate)", delivered, ""},
		{"email.opened", opened, ""},
		{"email.received (inbound)", inbound, ""},
	}
}

// Run sends the lifecycle and prints what mailhook answered and where the message ended.
func Run(ctx context.Context, o Options) error {
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 15 * time.Second}
	}
	if o.Provider != "" && o.Provider != "postscale" {
		return runProvider(ctx, o)
	}
	base := strings.TrimRight(o.BaseURL, "/")
	messageID := "msg_sim_" + randomHex(6)
	inboundID := "inb_sim_" + randomHex(6)
	fmt.Fprintf(o.Out, "Sending a lifecycle for message %s to %s/webhooks/%s\n", messageID, base, o.Endpoint)
	for _, step := range Lifecycle(messageID, inboundID, time.Now().Add(-15*time.Minute)) {
		code, body, err := post(ctx, o, base+"/webhooks/"+o.Endpoint, step.Body)
		if err != nil {
			return fmt.Errorf("send %s: %w", step.Name, err)
		}
		fmt.Fprintf(o.Out, "  %-45s → %d %s\n", step.Name, code, strings.TrimSpace(string(body)))
		if code != http.StatusOK {
			return fmt.Errorf("mailhook answered %d to %s: %s", code, step.Name, body)
		}
	}

	deadline := time.Now().Add(o.Wait)
	url := fmt.Sprintf("%s/v1/messages/postscale/%s", base, messageID)
	for {
		m, err := getMessage(ctx, o.Client, url, o.Token)
		if err == nil && m.Status == "bounced" && len(m.Events) == 4 {
			fmt.Fprintf(o.Out, "\nMessage %s: status %s (%s bounce), version %d, opens %d\n", m.MessageID, m.Status, m.BounceType, m.Version, m.Opens)
			for _, e := range m.Events {
				fmt.Fprintf(o.Out, "  %-16s %-9s %-8s moved=%v\n", e.Type, e.Status, e.Outcome, e.Moved)
			}
			// The API needs the bearer token, so a bare link would answer 401 in a browser.
			token := "$MAILHOOK_ADMIN_TOKEN"
			if o.Token == config.DevAdminToken {
				token = o.Token // public anyway; printed so the command works as pasted
			}
			// Double quotes: the shell expands $MAILHOOK_ADMIN_TOKEN in the line as pasted.
			fmt.Fprintf(o.Out, "\nSee it with:\n  curl -H \"Authorization: Bearer %s\" %s\n", token, url)
			// The same answers without a token, from the database (docs/COMMANDS.md).
			fmt.Fprintf(o.Out, "  mailhook messages get postscale %s   # why it bounced\n", messageID)
			fmt.Fprintf(o.Out, "  mailhook suppressions check %s   # is the recipient suppressed\n", Recipient)
			fmt.Fprintf(o.Out, "In the Temporal UI (http://127.0.0.1:8233 with make run), filter by MessageID = %q.\n", messageID)
			consoleLine(o.Out, base)
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("status %q with %d events", m.Status, len(m.Events))
			}
			return fmt.Errorf("message %s did not settle within %s (is the worker running?): %w", messageID, o.Wait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func post(ctx context.Context, o Options, url string, body []byte) (int, []byte, error) {
	// Signed as Postscale signs, since the simulator plays Postscale.
	signer, err := signature.NewTimestamped([]string{o.Secret}, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("webhook secret: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(postscale.DeliveryIDHeader, "sim-"+randomHex(8))
	req.Header.Set(postscale.SignatureHeader, signer.Sign(time.Now(), body))
	resp, err := o.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, b, nil
}

// message is what the simulator reads of GET /v1/messages/{provider}/{message_id}: it is a
// client of the API, as a user's script would be, so it reads the JSON the API documents
// (internal/httpapi/openapi.json), not the store's types.
type message struct {
	MessageID  string `json:"message_id"`
	Status     string `json:"status"`
	BounceType string `json:"bounce_type"`
	Version    int64  `json:"version"`
	Opens      int64  `json:"opens"`
	Events     []struct {
		Type    string `json:"type"`
		Status  string `json:"status"`
		Outcome string `json:"outcome"`
		Moved   bool   `json:"moved"`
	} `json:"events"`
}

func getMessage(ctx context.Context, c *http.Client, url, token string) (message, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return message{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return message{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return message{}, fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	var m message
	return m, json.NewDecoder(resp.Body).Decode(&m)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// runProvider sends one message's lifecycle as o.Provider sends it, signed as it signs, and
// waits for the message to end bounced.
func runProvider(ctx context.Context, o Options) error {
	sp, ok := speakers[o.Provider]
	if NeedsMapping(o.Provider) {
		var err error
		if sp, err = genericSpeaker(o.Provider, o.Generic); err != nil {
			return err
		}
	} else if !ok {
		return fmt.Errorf("simulate speaks %s, not %s", strings.Join(Providers, ", "), o.Provider)
	}
	base := strings.TrimRight(o.BaseURL, "/")
	id := "sim" + randomHex(8)
	messageID := sp.messageID(id)
	fmt.Fprintf(o.Out, "Sending a %s lifecycle for message %s to %s/webhooks/%s\n", o.Provider, messageID, base, o.Endpoint)
	for _, st := range sp.steps(id, time.Now().Add(-15*time.Minute)) {
		now := time.Now()
		if o.Provider == "mailgun" {
			st.Body = mailgunBody(o.Secret, st.Body, now)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/webhooks/"+o.Endpoint, bytes.NewReader(st.Body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		if err := sp.sign(req, st, o.Secret, o.Key, now); err != nil {
			return err
		}
		code, body, err := do(o.Client, req)
		if err != nil {
			return fmt.Errorf("send %s: %w", st.Name, err)
		}
		fmt.Fprintf(o.Out, "  %-45s → %d %s\n", st.Name, code, strings.TrimSpace(string(body)))
		if code != http.StatusOK {
			return fmt.Errorf("mailhook answered %d to %s: %s", code, st.Name, body)
		}
	}
	deadline := time.Now().Add(o.Wait)
	// A generic provider's events are keyed under the endpoint's name (provider.EventNamespace).
	namespace := o.Provider
	if NeedsMapping(o.Provider) {
		namespace = o.Endpoint
	}
	url := fmt.Sprintf("%s/v1/messages/%s/%s", base, namespace, messageID)
	for {
		m, err := getMessage(ctx, o.Client, url, o.Token)
		if err == nil && m.Status == "bounced" && len(m.Events) == sp.events {
			bounceType := m.BounceType + " bounce"
			if m.BounceType == "" {
				// A generic endpoint that maps neither bounce field (docs/providers/hmac.md).
				bounceType = "no bounce type: map generic.bounce_type_field or diagnostic_field"
			}
			fmt.Fprintf(o.Out, "\nMessage %s: status %s (%s), version %d\n", m.MessageID, m.Status, bounceType, m.Version)
			fmt.Fprintf(o.Out, "\nSee it with:\n  mailhook messages get %s %s   # why it bounced\n", namespace, messageID)
			fmt.Fprintf(o.Out, "  mailhook suppressions check %s   # is the recipient suppressed\n", Recipient)
			consoleLine(o.Out, base)
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("status %q with %d events", m.Status, len(m.Events))
			}
			return fmt.Errorf("message %s did not settle within %s (is the worker running?): %w", messageID, o.Wait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// consoleLine prints where the console shows why the recipient bounced: its messages, each with
// its status, one click from the bounce (the console is on the listener the /v1 API is on).
func consoleLine(w io.Writer, base string) {
	fmt.Fprintf(w, "Why it bounced, in the console (sign in with the admin token):\n  %s/console/messages?recipient=%s\n",
		base, url.QueryEscape(Recipient))
}

func do(c *http.Client, req *http.Request) (int, []byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, b, nil
}
