// Package ses is the provider adapter for Amazon SES events delivered by Amazon SNS to an HTTPS
// subscription: SES event publishing (a configuration set's SNS event destination, "eventType")
// and the older identity notifications ("notificationType").
//
// Verification follows the SNS developer guide (sns-verify-signature-of-message): the TopicArn
// must be allow-listed, the signing certificate must come over https from an SNS host, and the
// RSA signature (SignatureVersion 1 = SHA1withRSA, 2 = SHA256withRSA) must match the canonical
// string of the message type. docs/providers/ses.md describes the scheme, the event mapping
// and the AWS setup.
package ses

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/allowlist"
)

// Name is the provider name endpoints are configured with and events are keyed by.
const Name = "ses"

// Request headers SNS sends.
const (
	MessageTypeHeader = "X-Amz-Sns-Message-Type"
	MessageIDHeader   = "X-Amz-Sns-Message-Id"
	TopicARNHeader    = "X-Amz-Sns-Topic-Arn"
)

// Control outcomes, reported as {"status": …} with 200.
const (
	StatusSubscribed   = "subscribed"
	StatusUnsubscribed = "unsubscribed"
	StatusIgnored      = "ignored"
)

// SetupNotice is the plain-text Notification SES publishes once when an SNS event destination
// is added to a configuration set. It is not an event.
const SetupNotice = "Successfully validated SNS topic for Amazon SES event publishing."

// MinTolerance is the shortest Timestamp tolerance New accepts. SNS re-sends a failed delivery
// with its original Timestamp for up to an hour (the total retry time of an HTTP/S delivery
// policy cannot exceed 3,600 s), and answers 4xx by dropping the message for good, so a shorter
// window would silently lose retried events. Zero, the default, does not check the Timestamp.
const MinTolerance = time.Hour

// Verification failures. Each error Verify returns wraps one of them (the last one wrapped, so
// it is what the HTTP layer reports); all but ErrCertUnavailable also wrap
// provider.ErrUnauthorized.
var (
	ErrMalformed        = errors.New("malformed SNS message")
	ErrMessageType      = errors.New("x-amz-sns-message-type does not match the message Type")
	ErrTopicNotAllowed  = errors.New("TopicArn is not in topic_arns")
	ErrSourceAddress    = errors.New("source address is not in allow_cidrs")
	ErrSignatureVersion = errors.New("unsupported SignatureVersion (want 1 or 2)")
	ErrTimestamp        = errors.New("Timestamp is outside the tolerance")
	ErrCertURL          = errors.New("SigningCertURL is not an allowed SNS certificate URL")
	ErrCertificate      = errors.New("signing certificate is not acceptable")
	ErrSignature        = errors.New("signature does not match")
	// ErrCertUnavailable means the certificate could not be fetched for a reason a retry may
	// fix (network, timeout, 5xx, or Mailhook's own limit on outbound fetches, CertFetchRate).
	// It does not wrap provider.ErrUnauthorized: answering 4xx would make SNS drop the message
	// for good, so it is worth a 503 instead.
	ErrCertUnavailable = errors.New("signing certificate could not be fetched")
)

func init() {
	provider.Register(Name, New, provider.WithoutSecrets())
}

// Adapter verifies and parses SNS deliveries of SES events for one endpoint. It is safe for
// concurrent use.
type Adapter struct {
	topics    map[string]bool
	hosts     *regexp.Regexp
	client    *http.Client
	tolerance time.Duration
	allow     allowlist.List
	certs     *certCache
}

var (
	_ provider.Adapter    = (*Adapter)(nil)
	_ provider.Controller = (*Adapter)(nil)
)

// New builds an adapter. It requires topic_arns (exact TopicArn values; SNS docs: "Reject any
// message with an unexpected TopicArn"), accepts cert_host_pattern (matched against the whole
// host name; empty means DefaultCertHostPattern), tolerance (zero: no Timestamp check,
// otherwise at least MinTolerance) and allow_cidrs, and rejects secrets and generic, which SES
// does not use.
func New(s provider.Settings) (provider.Adapter, error) {
	if len(s.TopicARNs) == 0 {
		return nil, errors.New("ses: topic_arns: at least one SNS topic ARN is required")
	}
	topics := make(map[string]bool, len(s.TopicARNs))
	for i, arn := range s.TopicARNs {
		if strings.TrimSpace(arn) == "" {
			return nil, fmt.Errorf("ses: topic_arns[%d] is empty", i)
		}
		if arn != strings.TrimSpace(arn) || !strings.HasPrefix(arn, "arn:") || !strings.Contains(arn, ":sns:") {
			return nil, fmt.Errorf("ses: topic_arns[%d] %q is not an SNS topic ARN (arn:aws:sns:<region>:<account>:<topic>)", i, arn)
		}
		topics[arn] = true
	}
	if len(s.Secrets) > 0 {
		return nil, errors.New("ses: secrets: not used: SNS messages are verified with Amazon's signing certificates; remove secrets")
	}
	if s.Generic != nil {
		return nil, errors.New("ses: generic: not used by provider ses")
	}
	hosts, err := hostMatcher(s.CertHostPattern)
	if err != nil {
		return nil, fmt.Errorf("ses: cert_host_pattern: %w", err)
	}
	// Zero means no Timestamp check at all, not a default window.
	tol, err := s.ToleranceOr(Name, 0)
	if err != nil {
		return nil, err
	}
	if tol > 0 && tol < MinTolerance {
		return nil, fmt.Errorf("ses: tolerance %s is shorter than the %s SNS keeps retrying with the original Timestamp; retried events would be rejected (use 0 for no check)", tol, MinTolerance)
	}
	allow, err := allowlist.Parse(Name, s.AllowCIDRs)
	if err != nil {
		return nil, err
	}
	return &Adapter{
		topics:    topics,
		hosts:     hosts,
		client:    noRedirects(s.HTTPClient),
		tolerance: tol,
		allow:     allow,
		certs:     newCertCache(CertCacheSize),
	}, nil
}

func unauthorized(cause error, detail string) error {
	if detail != "" {
		cause = fmt.Errorf("%w: %s", cause, detail)
	}
	return fmt.Errorf("ses: %w: %w", provider.ErrUnauthorized, cause)
}

// Verify authenticates an SNS delivery. Cheap checks (shape, header, topic, source address,
// signature version, URL) run before the certificate is fetched, so a request for a topic that
// is not allowed never makes Mailhook call out.
func (a *Adapter) Verify(r provider.Request) error {
	if !a.allow.Allows(r.RemoteIP) {
		return unauthorized(ErrSourceAddress, "")
	}
	env, err := decodeEnvelope(r.Body)
	if err != nil {
		return unauthorized(ErrMalformed, strings.TrimPrefix(err.Error(), errEnvelope.Error()+": "))
	}
	if err := requireFields(&env); err != nil {
		return unauthorized(ErrMalformed, err.Error())
	}
	if got := r.Header.Get(MessageTypeHeader); got != env.Type {
		return unauthorized(ErrMessageType, "")
	}
	if h := r.Header.Get(TopicARNHeader); h != "" && h != env.TopicARN {
		return unauthorized(ErrTopicNotAllowed, "x-amz-sns-topic-arn does not match TopicArn")
	}
	if !a.topics[env.TopicARN] {
		return unauthorized(ErrTopicNotAllowed, "")
	}
	canonical, err := stringToSign(&env)
	if err != nil {
		return unauthorized(ErrMalformed, err.Error())
	}
	hash, sum, ok := digest(env.SignatureVersion, canonical)
	if !ok {
		return unauthorized(ErrSignatureVersion, "")
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signature)
	if err != nil || len(sig) == 0 {
		return unauthorized(ErrSignature, "Signature is not base64")
	}
	now := r.Now
	if now.IsZero() {
		now = time.Now()
	}
	if a.tolerance > 0 {
		ts, err := time.Parse(time.RFC3339Nano, env.Timestamp)
		if err != nil {
			return unauthorized(ErrTimestamp, "Timestamp is not RFC 3339")
		}
		if d := now.Sub(ts); d > a.tolerance || d < -a.tolerance {
			return unauthorized(ErrTimestamp, "")
		}
	}
	if _, err := a.checkURL(env.SigningCertURL, true); err != nil {
		return unauthorized(ErrCertURL, err.Error())
	}
	ctx := r.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	cert, err := a.certificate(ctx, env.SigningCertURL, now)
	if err != nil {
		if errors.Is(err, ErrCertUnavailable) {
			return fmt.Errorf("ses: %w", err)
		}
		return fmt.Errorf("ses: %w: %w", provider.ErrUnauthorized, err)
	}
	if err := rsa.VerifyPKCS1v15(cert.PublicKey.(*rsa.PublicKey), hash, sum, sig); err != nil {
		return unauthorized(ErrSignature, "")
	}
	return nil
}

// requireFields checks that the keys the message type signs, and those Verify needs, are set.
func requireFields(e *Envelope) error {
	missing := func(k string) error { return fmt.Errorf("missing %q", k) }
	switch {
	case e.Type == "":
		return missing("Type")
	case e.MessageID == "":
		return missing("MessageId")
	case e.TopicARN == "":
		return missing("TopicArn")
	case e.Timestamp == "":
		return missing("Timestamp")
	case e.SignatureVersion == "":
		return missing("SignatureVersion")
	case e.Signature == "":
		return missing("Signature")
	case e.SigningCertURL == "":
		return missing("SigningCertURL")
	}
	if e.Type == TypeSubscriptionConfirmation || e.Type == TypeUnsubscribeConfirmation {
		switch {
		case e.Token == "":
			return missing("Token")
		case e.SubscribeURL == "":
			return missing("SubscribeURL")
		}
	}
	return nil
}

// Control handles the SNS messages that are not SES events. It runs after Verify.
//
//   - SubscriptionConfirmation: GETs SubscribeURL (https, an SNS host, Action=ConfirmSubscription
//     for this TopicArn) and reports "subscribed". A failed GET is a plain error, so the HTTP
//     layer answers 503 and SNS re-sends the confirmation.
//   - UnsubscribeConfirmation: logged and reported "unsubscribed"; Mailhook does not
//     re-subscribe (its SubscribeURL would).
//   - Notification carrying SetupNotice: reported "ignored".
//   - Any other Notification: not handled; Parse runs.
func (a *Adapter) Control(r provider.Request) (handled bool, status string, err error) {
	env, err := decodeEnvelope(r.Body)
	if err != nil {
		return false, "", fmt.Errorf("ses: %w: %w", provider.ErrBadRequest, err)
	}
	// slog.Default is read here, not in New: adapters are built while the config is validated,
	// possibly before the process installs its logger.
	log := slog.Default().With("provider", Name, "topic_arn", env.TopicARN, "sns_message_id", env.MessageID)
	switch env.Type {
	case TypeNotification:
		if strings.TrimSpace(env.Message) == SetupNotice {
			log.Info("ses event destination validated")
			return true, StatusIgnored, nil
		}
		return false, "", nil
	case TypeSubscriptionConfirmation:
		if err := a.confirm(r.Ctx, &env); err != nil {
			return false, "", err
		}
		log.Info("sns subscription confirmed")
		return true, StatusSubscribed, nil
	case TypeUnsubscribeConfirmation:
		log.Warn("sns subscription deleted; mailhook does not re-subscribe (visit the message's SubscribeURL to undo)")
		return true, StatusUnsubscribed, nil
	}
	return false, "", fmt.Errorf("ses: %w: %w", provider.ErrBadRequest, ErrMessageType)
}

// confirm GETs the SubscribeURL of a verified SubscriptionConfirmation.
func (a *Adapter) confirm(ctx context.Context, env *Envelope) error {
	u, err := a.checkURL(env.SubscribeURL, false)
	if err != nil {
		return fmt.Errorf("ses: %w: SubscribeURL: %w", provider.ErrBadRequest, err)
	}
	q := u.Query()
	if q.Get("Action") != "ConfirmSubscription" {
		return fmt.Errorf("ses: %w: %w", provider.ErrBadRequest, errors.New("SubscribeURL is not a ConfirmSubscription URL"))
	}
	if t := q.Get("TopicArn"); t != "" && t != env.TopicARN {
		return fmt.Errorf("ses: %w: %w", provider.ErrBadRequest, errors.New("SubscribeURL names another topic"))
	}
	if ctx == nil {
		ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("ses: %w: SubscribeURL: %w", provider.ErrBadRequest, err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("ses: confirming subscription: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxConfirmBytes))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("ses: confirming subscription: SubscribeURL answered %d", resp.StatusCode)
	}
	return nil
}

// Parse turns a verified Notification into events: one per recipient the SES event names (see
// parse for the keying rules).
func (a *Adapter) Parse(r provider.Request) ([]domain.Event, error) {
	return parse(r.Body)
}
