package standardwebhooks

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/fieldmap"
)

// DefaultTypeField is where the event type is when generic.type_field is not set: Standard
// Webhooks' own payload structure puts it at the top-level "type".
const DefaultTypeField = fieldmap.DefaultTypeField

// newMapping validates the generic settings of a "standard-webhooks" endpoint. The signature
// scheme and the event id are fixed by Standard Webhooks, so only the event mapping applies.
func newMapping(name string, g *provider.Generic) (*fieldmap.Mapping, error) {
	if g != nil {
		for _, f := range []struct{ key, value string }{
			{"signature_header", g.SignatureHeader}, {"signature_prefix", g.SignaturePrefix}, {"algorithm", g.Algorithm},
			{"encoding", g.Encoding}, {"signed", g.Signed}, {"timestamp_header", g.TimestampHeader}, {"separator", g.Separator},
		} {
			if f.value != "" {
				return nil, fmt.Errorf("%s: generic.%s does not apply: Standard Webhooks fixes the signature scheme", name, f.key)
			}
		}
		if g.AllowUnsignedReplay {
			return nil, fmt.Errorf("%s: generic.allow_unsigned_replay does not apply: Standard Webhooks always signs the id and a timestamp", name)
		}
		if g.EventIDField != "" || g.EventIDHeader != "" {
			return nil, fmt.Errorf("%s: generic.event_id_field and generic.event_id_header do not apply: the event id is the webhook-id header", name)
		}
	}
	return fieldmap.New(name, g)
}

// parseGeneric decodes body, which must be one JSON object, and maps it. The caller sets the
// event id.
func parseGeneric(m *fieldmap.Mapping, name string, body []byte) (domain.Event, error) {
	v, err := fieldmap.Decode(name, body)
	if err != nil {
		return domain.Event{}, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return domain.Event{}, provider.BadRequest(name, "body is a JSON %s, not an object", fieldmap.Kind(v))
	}
	ev, err := m.Map(name, obj, "")
	if err != nil {
		return domain.Event{}, err
	}
	ev.Raw = json.RawMessage(bytes.Clone(body))
	return ev, nil
}
