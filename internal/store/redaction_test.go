package store_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
)

// When suppressing fails, the error (logged by the worker and kept by Temporal as the activity's
// failure, and in quarantine_error) names the address only masked.
func TestSuppressErrorRedactsTheAddress(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := t.Context()
	_, err := s.Pool().Exec(ctx, `
CREATE FUNCTION refuse_suppression() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'suppressions are read-only today'; END $$;
CREATE TRIGGER refuse BEFORE INSERT ON suppressions FOR EACH ROW EXECUTE FUNCTION refuse_suppression();`)
	require.NoError(t, err)

	ev := statusEvent("evt_bounce", "msg_1", domain.StatusBounced, domain.BounceHard, at(0))
	ev.Recipient = "Jane.Doe+private@example.com"
	_, err = s.Events.ApplyStatus(ctx, ev, rules)
	require.Error(t, err)
	assert.NotContains(t, strings.ToLower(err.Error()), "jane.doe")
	assert.Contains(t, err.Error(), "suppress j***@example.com")
}
