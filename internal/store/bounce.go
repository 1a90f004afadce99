package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mailhook/mailhook/internal/bounce"
	"github.com/mailhook/mailhook/internal/domain"
)

// MaxEnhancedCodeBytes bounds an enhanced status code: RFC 3463's longest, 5.999.999, is 9.
const MaxEnhancedCodeBytes = 16

// bounceDetails is b as the API shows it: nil when there are none.
func bounceDetails(b domain.Bounce) *domain.Bounce {
	if b == (domain.Bounce{}) {
		return nil
	}
	return &b
}

// storableBounce says why b cannot be stored, or nil: what PostgreSQL's text and int columns
// would refuse, and a category outside BounceCategories.
func storableBounce(b *domain.Bounce) error {
	if b == nil {
		return nil
	}
	// A reply code is three digits; anything else is an adapter's bug, not a server's answer.
	if b.SMTPCode < 0 || b.SMTPCode > 999 {
		return fmt.Errorf("bounce smtp code %d is not a three-digit reply code", b.SMTPCode)
	}
	for _, f := range [...]struct {
		name, v string
		max     int
	}{
		{"bounce enhanced code", b.EnhancedCode, MaxEnhancedCodeBytes},
		{"bounce diagnostic", b.Diagnostic, domain.MaxDiagnosticBytes},
	} {
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%s is not valid UTF-8", f.name)
		}
		if strings.IndexByte(f.v, 0) >= 0 {
			return fmt.Errorf("%s contains NUL", f.name)
		}
		if len(f.v) > f.max {
			return fmt.Errorf("%s is %d bytes, more than %d", f.name, len(f.v), f.max)
		}
	}
	// Only the classifier's categories, so the daily report's counts and the API's enum stay
	// within a known set. Not quoted back: it could be anything, NUL included.
	if b.Category != "" && !slices.Contains(bounce.Categories, b.Category) {
		return errors.New("bounce category is not a known one")
	}
	return nil
}
