package provider

import (
	"strings"
	"unicode/utf8"

	"github.com/mailhook/mailhook/internal/domain"
)

// Bounds of an engagement's details: a longer link, user agent or address is dropped (never
// cut: half a URL is a different link), as is one holding a NUL or invalid UTF-8.
const (
	MaxEngagementURLBytes       = 2048
	MaxEngagementUserAgentBytes = 512
	MaxEngagementIPBytes        = 64
)

// SetEngagement sets ev.Engagement on an open, a click or an unsubscribe from what its provider
// said; other events, and an engagement with nothing said, keep none.
func SetEngagement(ev *domain.Event, url, userAgent, ip string, machine bool) {
	switch ev.Kind {
	case domain.KindOpened, domain.KindClicked, domain.KindUnsubscribed:
	default:
		return
	}
	e := domain.Engagement{
		URL:       bounded(url, MaxEngagementURLBytes),
		UserAgent: bounded(userAgent, MaxEngagementUserAgentBytes),
		IP:        bounded(ip, MaxEngagementIPBytes),
		Machine:   machine,
	}
	if e != (domain.Engagement{}) {
		ev.Engagement = &e
	}
}

func bounded(s string, max int) string {
	s = strings.TrimSpace(s)
	if len(s) > max || !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return ""
	}
	return s
}
