package providertest

import "github.com/mailhook/mailhook/internal/domain"

// Meta is an event's metadata and tags, as a fixture test expects them.
type Meta struct {
	Metadata map[string]string
	Tags     []string
	Dropped  int
	// Engagement is the event's (domain.Event.Engagement), compared with the rest.
	Engagement *domain.Engagement
}

// TakeMeta returns ev's metadata, tags, dropped count and engagement and clears them from ev, so a fixture
// test compares them against its own table and the rest of the event as before.
func TakeMeta(ev *domain.Event) Meta {
	m := Meta{Metadata: ev.Metadata, Tags: ev.Tags, Dropped: ev.MetadataDropped, Engagement: ev.Engagement}
	ev.Metadata, ev.Tags, ev.MetadataDropped, ev.Engagement = nil, nil, 0, nil
	return m
}
