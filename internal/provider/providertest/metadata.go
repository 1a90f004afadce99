package providertest

import "github.com/mailhook/mailhook/internal/domain"

// Meta is an event's metadata and tags, as a fixture test expects them.
type Meta struct {
	Metadata map[string]string
	Tags     []string
	Dropped  int
}

// TakeMeta returns ev's metadata, tags and dropped count and clears them from ev, so a fixture
// test compares them against its own table and the rest of the event as before.
func TakeMeta(ev *domain.Event) Meta {
	m := Meta{Metadata: ev.Metadata, Tags: ev.Tags, Dropped: ev.MetadataDropped}
	ev.Metadata, ev.Tags, ev.MetadataDropped = nil, nil, 0
	return m
}
