package httpapi_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/mailhook/mailhook/internal/bounce"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/httpapi/openapitest"
	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/store"
)

// The document's enums are the store's lists: a reason or category the store accepts and the
// document lacks would fail every answer that shows it.
func TestOpenAPIBounceAndReasonEnumsMatchTheStore(t *testing.T) {
	doc, _, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	enum := func(name string) []string {
		var out []string
		for _, v := range doc.Components.Schemas[name].Value.Enum {
			out = append(out, v.(string))
		}
		return out
	}
	if got := enum("SuppressionReason"); !slices.Equal(got, domain.SuppressionReasons) {
		t.Errorf("SuppressionReason enum %v, domain.SuppressionReasons %v", got, domain.SuppressionReasons)
	}
	if got := enum("BounceCategory"); !slices.Equal(got, bounce.Categories) {
		t.Errorf("BounceCategory enum %v, bounce.Categories %v", got, bounce.Categories)
	}
}

// A message and a report with bounce details are what the document describes.
func TestOpenAPIDescribesBounceDetails(t *testing.T) {
	doc, _, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	b := &domain.Bounce{SMTPCode: 452, EnhancedCode: "4.2.2", Diagnostic: "452 4.2.2 Mailbox full", Category: "mailbox_full"}
	msg := store.Message{Provider: "postscale", MessageID: "msg_1", Status: domain.StatusBounced, BounceType: domain.BounceSoft,
		Version: 1, Bounce: b, CreatedAt: now, UpdatedAt: now, Events: []store.MessageEvent{{
			EventID: "evt_1", Type: "email.bounced", Status: domain.StatusBounced, OccurredAt: now, ReceivedAt: now,
			Outcome: domain.OutcomeMoved, Moved: true, To: domain.StatusBounced, Version: 1, Suppressed: true, Bounce: b,
		}}}
	rep := reconcile.Report{Date: "2026-11-28", Counts: []domain.DailyCount{}, BounceCategories: map[string]int64{"mailbox_full": 1, "unknown_user": 2}}
	for name, v := range map[string]any{"Message": msg, "Report": rep} {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var value any
		if err := json.Unmarshal(raw, &value); err != nil {
			t.Fatal(err)
		}
		if err := doc.Components.Schemas[name].Value.VisitJSON(value, openapi3.MultiErrors()); err != nil {
			t.Errorf("%s %s: %v", name, raw, err)
		}
	}
}
