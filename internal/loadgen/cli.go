package loadgen

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/spf13/cobra"
)

// Command is `mailhook-loadtest` (and `mailhook-loadtest keygen`, `mailhook-loadtest
// suppression-check`, `mailhook-loadtest receiver`).
func Command() *cobra.Command {
	o := Options{}
	var mix, keyPath string
	var cpu []string
	cmd := &cobra.Command{
		Use:   "mailhook-loadtest",
		Short: "Drive a running mailhook with signed webhooks, receive its notifications, and check the result",
		Long: `mailhook-loadtest sends signed Postscale events and SendGrid batches to a running mailhook at
a target rate or concurrency, with message lifecycles in and out of order and duplicates (some
sent concurrently), receives mailhook's notifications on its own sink (--sink-listen; configure a
mailhook sink with that URL, --sink-secret and types [message.status_changed, email.received,
suppression.added]), waits until every accepted event is processed (--database-url), and checks
mailhook's API (--token) and database: every accepted event recorded once and processed, every
message in the status the precedence fold of its events gives, every notification id received.
It reports each notification's latency too: its first receipt at the sink minus the moment its
event's first webhook request was sent. It exits non-zero when a check fails. Loopback
addresses only.`,
		Example: `  mailhook-loadtest keygen --out /tmp/sg.pem     # prints the key for the sendgrid endpoint
  mailhook-loadtest --url http://127.0.0.1:18000 --postscale-secret whsec_… \
    --sendgrid-key /tmp/sg.pem --mix postscale=3,sendgrid=1 --concurrency 50 --duration 30s \
    --sink-listen 127.0.0.1:19100 --sink-secret whsec_… --database-url postgres://…/mailhook_bench \
    --token … --dup-probe 500`,
		RunE: func(c *cobra.Command, _ []string) error {
			w, err := parseMix(mix)
			if err != nil {
				return err
			}
			o.Weights = w
			if keyPath != "" {
				if o.SendGridKey, err = LoadSendGridKey(keyPath); err != nil {
					return err
				}
			}
			if o.CPU, err = ParseCPUTargets(cpu); err != nil {
				return err
			}
			if o.SinkSecret == "" || o.DatabaseURL == "" || o.Token == "" {
				return errors.New("--sink-secret, --database-url and --token are required (the verdict needs them)")
			}
			o.Out = c.OutOrStdout()
			_, err = Run(c.Context(), o)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.URL, "url", "http://127.0.0.1:8000", "mailhook base URL (loopback)")
	f.StringVar(&o.PostscaleEndpoint, "postscale-endpoint", "postscale", "endpoint name of the Postscale endpoint")
	f.StringVar(&o.PostscaleSecret, "postscale-secret", os.Getenv("POSTSCALE_WEBHOOK_SECRET"), "Postscale signing secret (default $POSTSCALE_WEBHOOK_SECRET)")
	f.StringVar(&o.SendGridEndpoint, "sendgrid-endpoint", "sendgrid", "endpoint name of the SendGrid endpoint")
	f.StringVar(&keyPath, "sendgrid-key", "", "ECDSA P-256 private key (PEM or DER, PKCS#8 or SEC 1) whose public key the sendgrid endpoint lists; make one with 'mailhook-loadtest keygen'")
	f.StringVar(&mix, "mix", "postscale=1", "share of requests by provider, e.g. postscale=3,sendgrid=1")
	f.Float64Var(&o.Rate, "rate", 0, "requests per second, open loop (0: closed loop with --concurrency)")
	f.IntVar(&o.Concurrency, "concurrency", 50, "concurrent senders (closed loop, when --rate is 0)")
	f.IntVar(&o.MaxInflight, "max-inflight", 1000, "open loop: most requests in flight; beyond it requests are skipped and counted")
	f.DurationVar(&o.Duration, "duration", 30*time.Second, "how long to send")
	f.IntVar(&o.MaxEvents, "events", 0, "stop sending once this many new events were sent (a burst; 0: send for --duration)")
	f.DurationVar(&o.Warmup, "warmup", 3*time.Second, "start of the send phase left out of rates and latencies")
	f.Float64Var(&o.DupShare, "dup-share", 0.1, "share of requests that re-send an earlier request's body [0, 0.5)")
	f.Float64Var(&o.DupConcurrent, "dup-concurrent", 0.5, "share of the re-sends sent at the same moment as the original")
	f.Float64Var(&o.OutOfOrder, "out-of-order", 0.3, "share of message lifecycles sent in a shuffled order")
	f.BoolVar(&o.Metadata, "metadata", false, "every delivery event carries a sender's metadata and tags (Postscale data.metadata/tags, SendGrid custom arguments)")
	f.IntVar(&o.MaxBatch, "max-batch", 10, "SendGrid batches carry 1..max-batch events")
	f.Int64Var(&o.Seed, "seed", 1, "random seed (same seed, same lifecycles)")
	f.IntVar(&o.MaxRetries, "max-retries", 5, "retries of a request answered 5xx or not at all (from 200ms, doubling)")
	f.StringVar(&o.SinkListen, "sink-listen", "127.0.0.1:9100", "address of the downstream receiver this command starts (loopback)")
	f.StringVar(&o.SinkSecret, "sink-secret", "", "the mailhook sink's whsec_ secret, to verify notifications")
	f.StringVar(&o.SinkName, "sink-name", "loadtest", "the sink's name in mailhook's config")
	f.StringVar(&o.DatabaseURL, "database-url", "", "mailhook's PostgreSQL database (loopback)")
	f.StringVar(&o.PGStatsRole, "pg-stats-role", "", "count what this role (mailhook's; not --database-url's) did to PostgreSQL per accepted event: needs pg_stat_statements")
	f.StringVar(&o.Token, "token", os.Getenv("MAILHOOK_ADMIN_TOKEN"), "admin API token (default $MAILHOOK_ADMIN_TOKEN)")
	f.DurationVar(&o.DrainTimeout, "drain-timeout", 5*time.Minute, "how long to wait for every accepted event to be processed")
	f.BoolVar(&o.NoDrain, "no-drain", false, "do not wait for processing: check only that every accepted event is recorded once (accept-path runs)")
	f.IntVar(&o.DupProbe, "dup-probe", 0, "after the drain, re-send this many processed Postscale events one at a time, then as many with --dup-probe-concurrency senders, and measure a duplicate's cost")
	f.IntVar(&o.DupProbeConcurrency, "dup-probe-concurrency", 10, "concurrent senders of the duplicate probe")
	f.StringVar(&o.MetricsURL, "metrics-url", "", "mailhook's /metrics, to count Temporal calls (default <url>/metrics)")
	f.StringArrayVar(&o.WorkerMetricsURLs, "worker-metrics-url", nil, "a 'mailhook worker' process's /metrics (its MAILHOOK_METRICS_ADDRESS), whose Temporal calls count too (repeatable)")
	f.StringVar(&o.TemporalAddress, "temporal-address", "", "Temporal frontend (loopback) to sample the run's workflow histories from (size, events, tasks per run); empty: no sample")
	f.StringVar(&o.TemporalNamespace, "temporal-namespace", "default", "namespace of --temporal-address")
	f.IntVar(&o.HistorySample, "history-sample", 200, "how many of the run's workflows to read the history of")
	f.IntVar(&o.MailhookPID, "mailhook-pid", 0, "pid of the 'mailhook serve' process, to report its peak RSS (VmHWM)")
	f.StringArrayVar(&cpu, "cpu", nil, "label=pid[+pid…], label=user:NAME or label=tree:PID (the process and its descendants): report the CPU those processes used (repeatable)")
	f.Float64Var(&o.FloodRate, "flood-rate", 0, "also send this many badly signed Postscale requests per second for the whole send phase, open loop (at most 512 in flight): the cost of a flood of bad signatures to the valid traffic")
	f.StringVar(&o.FloodSource, "flood-source", "127.0.0.3", "local address the flood comes from (loopback; every 127/8 address is this machine's)")
	f.StringVar(&o.JSONPath, "json", "", "also write the report as JSON to this file")
	f.StringVar(&o.EventsPath, "events-out", "", "write every generated event (JSON lines) to this file")
	f.StringVar(&o.LatencyPath, "latency-out", "", "write each notification's latency to this file (CSV: sent_unix_ms, latency_ms, type, id)")

	var out string
	var force bool
	keygen := &cobra.Command{
		Use:   "keygen",
		Short: "Create an ECDSA P-256 key for SendGrid batches and print its public key for the config",
		RunE: func(c *cobra.Command, _ []string) error {
			pub, err := GenerateSendGridKey(out, force)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "wrote %s\nSendGrid verification key (the sendgrid endpoint's secrets entry):\n%s\n", out, pub)
			return nil
		},
	}
	keygen.Flags().StringVar(&out, "out", "", "file to write the private key to (PEM, PKCS#8, mode 0600)")
	keygen.Flags().BoolVar(&force, "force", false, "overwrite an existing file")
	_ = keygen.MarkFlagRequired("out")
	cmd.AddCommand(keygen, suppressionCheckCommand(), receiverCommand(), slowBodiesCommand())
	return cmd
}

func parseMix(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, w, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(w)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("--mix %q: want provider=weight,…", s)
		}
		if name != Postscale && name != SendGrid {
			return nil, fmt.Errorf("--mix: unknown provider %q (postscale, sendgrid)", name)
		}
		out[name] = n
	}
	return out, nil
}

// LoadSendGridKey reads an ECDSA P-256 private key: PEM ("PRIVATE KEY" or "EC PRIVATE KEY") or
// DER (PKCS#8 or SEC 1).
func LoadSendGridKey(path string) (*ecdsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--sendgrid-key: %w", err)
	}
	der := b
	if block, _ := pem.Decode(b); block != nil {
		der = block.Bytes
	}
	var key any
	if key, err = x509.ParsePKCS8PrivateKey(der); err != nil {
		if key, err = x509.ParseECPrivateKey(der); err != nil {
			return nil, fmt.Errorf("--sendgrid-key %s: not a PKCS#8 or SEC 1 private key", path)
		}
	}
	k, ok := key.(*ecdsa.PrivateKey)
	if !ok || k.Curve != elliptic.P256() {
		return nil, fmt.Errorf("--sendgrid-key %s: not an ECDSA P-256 key", path)
	}
	return k, nil
}

// GenerateSendGridKey writes a new P-256 key to path and returns its public key the way
// SendGrid's dashboard shows it (base64 DER), ready for the endpoint's secrets.
func GenerateSendGridKey(path string, force bool) (string, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return "", err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return "", err
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return providertest.SendGridPublicKey(&k.PublicKey), nil
}
