package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Retention says how long mailhook keeps what it stores; the mailhook-retention schedule
// enforces it (docs/operations/retention.md).
//
// Two clocks, on purpose: the dedupe keys (provider, event id, state) are small and answer
// "duplicate" for a provider's late retry, so they stay for DedupeKeys; the payloads (the
// provider's JSON, the normalized event, notification bodies) are large and hold personal data,
// so they go after Payloads, a whole time partition at a time.
type Retention struct {
	// Payloads: a payload partition is dropped once its whole range ended longer ago than
	// this. Default 30 days.
	Payloads Period `yaml:"payloads"`
	// DedupeKeys: an event's key is removed once it was received longer ago than this and it is
	// processed; until then a re-delivery is answered as a duplicate. Default 400 days;
	// "forever" keeps them.
	DedupeKeys Period `yaml:"dedupe_keys"`
	// Partition is the payload partitions' size: "monthly" (default) or "daily". Daily keeps
	// less past Payloads (a partition is dropped only when all of it is old enough), at the cost
	// of more tables. Changing it later is safe: existing partitions stay, new ones fill the gaps.
	Partition string `yaml:"partition"`
	// InboundBodies: how long an inbound email's payload (the whole message) is kept once all
	// its notifications are sent. 0 removes it as soon as they are; unset keeps it for Payloads.
	InboundBodies *Period `yaml:"inbound_bodies"`
	// PartitionsAhead: how many partitions past the current one are created in advance, so an
	// insert never finds none (the store also creates a missing one on demand). Default 3.
	PartitionsAhead int `yaml:"partitions_ahead"`
	// RejectedRequests: how long a refused webhook request is kept for GET /v1/rejections.
	// Default 7 days; 0 keeps none.
	RejectedRequests Period `yaml:"rejected_requests"`
	// Audit: how long the operators' audit trail is kept (GET /v1/audit). Default 365 days.
	Audit Period `yaml:"audit"`
}

// Partition sizes.
const (
	PartitionMonthly = "monthly"
	PartitionDaily   = "daily"
)

// Forever is the Period of a retention that never removes anything.
const Forever Period = -1

// Period is a duration written in days ("30d"), in Go's units ("720h"), or "forever".
type Period time.Duration

// Duration returns p as a time.Duration (negative for Forever).
func (p Period) Duration() time.Duration { return time.Duration(p) }

// Forever reports whether p never expires.
func (p Period) Forever() bool { return p < 0 }

// String writes p the way ParsePeriod reads it.
func (p Period) String() string {
	switch {
	case p.Forever():
		return "forever"
	case time.Duration(p)%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(time.Duration(p)/(24*time.Hour)), 10) + "d"
	}
	return time.Duration(p).String()
}

// ParsePeriod reads "400d", "36h", "0" or "forever".
func ParsePeriod(s string) (Period, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "forever":
		return Forever, nil
	case s == "0":
		return 0, nil
	case strings.HasSuffix(s, "d"):
		n, err := strconv.ParseUint(strings.TrimSuffix(s, "d"), 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number of days", s)
		}
		return Period(time.Duration(n) * 24 * time.Hour), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a period (e.g. 30d, 36h, forever)", s)
	}
	return Period(d), nil
}

// UnmarshalYAML reads a Period from a YAML scalar.
func (p *Period) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("a period must be a scalar such as 30d, 36h or forever")
	}
	v, err := ParsePeriod(n.Value)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// InboundBodiesOr returns InboundBodies, or Payloads when it is unset.
func (r Retention) InboundBodiesOr() Period {
	if r.InboundBodies == nil {
		return r.Payloads
	}
	return *r.InboundBodies
}

func (r Retention) validate() error {
	switch r.Partition {
	case PartitionMonthly, PartitionDaily:
	default:
		return fmt.Errorf("config: retention.partition %q must be monthly or daily", r.Partition)
	}
	if r.Payloads.Forever() || r.Payloads < Period(24*time.Hour) {
		return errors.New("config: retention.payloads must be at least 1d (payloads are kept in time partitions that are dropped; a forever payload is not supported)")
	}
	if !r.DedupeKeys.Forever() && r.DedupeKeys < r.Payloads {
		return fmt.Errorf("config: retention.dedupe_keys (%s) must be at least retention.payloads (%s): a re-delivery of an event whose payload is still kept must still be a duplicate",
			r.DedupeKeys, r.Payloads)
	}
	if ib := r.InboundBodiesOr(); ib.Forever() || ib > r.Payloads {
		return fmt.Errorf("config: retention.inbound_bodies (%s) must be at most retention.payloads (%s)", ib, r.Payloads)
	}
	if r.RejectedRequests.Forever() || (r.RejectedRequests != 0 && r.RejectedRequests < Period(time.Hour)) {
		return errors.New("config: retention.rejected_requests must be 0 (keep none) or at least 1h (refused requests hold personal data; forever is not supported)")
	}
	if r.Audit.Forever() || r.Audit < Period(24*time.Hour) {
		return errors.New("config: retention.audit must be at least 1d (the trail names operators; forever is not supported)")
	}
	if r.PartitionsAhead < 1 || r.PartitionsAhead > 60 {
		return errors.New("config: retention.partitions_ahead must be between 1 and 60")
	}
	return nil
}

// DefaultRetention is what an unset retention section means.
func DefaultRetention() Retention {
	return Retention{
		Payloads:         Period(30 * 24 * time.Hour),
		DedupeKeys:       Period(400 * 24 * time.Hour),
		Partition:        PartitionMonthly,
		PartitionsAhead:  3,
		RejectedRequests: Period(7 * 24 * time.Hour),
		Audit:            Period(365 * 24 * time.Hour),
	}
}
