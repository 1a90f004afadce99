package precedence_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/precedence"
)

func TestBounceOfOnlyBouncesAndFailures(t *testing.T) {
	b := &domain.Bounce{SMTPCode: 421, Category: "temporary_failure"}
	for st, want := range map[domain.Status]*domain.Bounce{
		domain.StatusBounced: b, domain.StatusFailed: b, domain.StatusDeferred: nil, domain.StatusDelivered: nil,
	} {
		assert.Equal(t, want, precedence.BounceOf(domain.Event{Kind: domain.KindStatus, Status: st, Bounce: b}), st)
	}
	assert.Nil(t, precedence.BounceOf(domain.Event{Kind: domain.KindCorrection, Status: domain.StatusBounced, Bounce: b}))
	assert.Nil(t, precedence.BounceOf(domain.Event{Kind: domain.KindStatus, Status: domain.StatusBounced, Bounce: &domain.Bounce{}}))
}
