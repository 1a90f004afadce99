package store

import (
	"context"
	"fmt"
)

// MessageStatus is a message's status as a list shows it beside its key.
type MessageStatus struct {
	Status, BounceType string
}

// MessageKey is a message's key: the provider and the provider's message id.
type MessageKey struct{ Provider, MessageID string }

// One primary-key lookup per key (messages_pkey): the console's recipient search asks for at most
// the messages of 500 events.
const qMessageStatuses = `
SELECT m.provider, m.message_id, m.status, m.bounce_type
FROM unnest($1::text[], $2::text[]) AS k(provider, message_id)
JOIN messages m ON m.provider = k.provider AND m.message_id = k.message_id`

// MessageStatuses returns the status of each of the messages keys names that exists.
func (s *Messages) MessageStatuses(ctx context.Context, keys []MessageKey) (map[MessageKey]MessageStatus, error) {
	out := make(map[MessageKey]MessageStatus, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	provs, ids := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		provs[i], ids[i] = k.Provider, k.MessageID
	}
	rows, err := s.pool.Query(ctx, qMessageStatuses, provs, ids)
	if err != nil {
		return nil, fmt.Errorf("read message statuses: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k MessageKey
		var st MessageStatus
		if err := rows.Scan(&k.Provider, &k.MessageID, &st.Status, &st.BounceType); err != nil {
			return nil, fmt.Errorf("read message statuses: %w", err)
		}
		out[k] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read message statuses: %w", err)
	}
	return out, nil
}
