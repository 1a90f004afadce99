package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/workflows"
)

func TestWriteRetentionSaysWhatTheRunDidAndWhy(t *testing.T) {
	before := time.Date(2026, 11, 1, 1, 15, 0, 0, time.UTC)
	keys := before.AddDate(0, 0, -370)
	var b bytes.Buffer
	err := writeRetention(&b, workflows.RetentionResult{
		PayloadsBefore: before, DedupeKeysBefore: &keys,
		PartitionsCreated: []string{"event_payloads_p20270301_20270401"},
		LegacyPayloads:    activities.LegacyResult{Moved: 12, More: true},
		Partitions: domain.PartitionReport{
			Dropped: []domain.DroppedPartition{{Name: "event_payloads_p20260901_20261001", Bytes: 2_500_000, Finalized: true}},
			Kept: []domain.KeptPartition{{Name: "event_payloads_p20261001_20261101", Reason: domain.KeptUnprocessed,
				Unprocessed: 3, Quarantined: 1}},
		},
		DedupeKeys: &activities.PruneResult{PruneReport: domain.PruneReport{Keys: 5001, Batches: 2, Notifications: 4}},
		Errors:     []workflows.StepError{{Step: "CreatePartitions", Error: "boom"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"payload partitions ending by 2026-11-01T01:15:00Z expired; dedupe keys: received before 2025-10-27T01:15:00Z",
		"partitions created: event_payloads_p20270301_20270401",
		"legacy payloads moved: 12 (more left",
		"event_payloads_p20260901_20261001  2.5 MB  finished a detach an earlier run left pending",
		"event_payloads_p20261001_20261101  unprocessed events  3 unprocessed events (1 quarantined)",
		"dedupe keys deleted: 5001 in 2 batches, with 0 replays, 4 notifications",
		"FAILED CreatePartitions: boom",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func TestRetentionRunRefusesANegativeWait(t *testing.T) {
	cmd := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
	cmd.SetArgs([]string{"retention", "run", "--wait", "-1s"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--wait") || exitCode(err) != exitUsage {
		t.Fatalf("error %v (exit %d), want a usage error naming --wait", err, exitCode(err))
	}
}
