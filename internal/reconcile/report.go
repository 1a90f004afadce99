package reconcile

import (
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/providercounts"
	"github.com/mailhook/mailhook/internal/store"
)

// ReportSource counts a day's events.
type ReportSource interface {
	DailyCounts(ctx context.Context, day time.Time, provider string) ([]domain.DailyCount, error)
	DailyBounceCategories(ctx context.Context, day time.Time, provider string) ([]store.BounceCategoryCount, error)
	ProviderCounts(ctx context.Context, day time.Time, provider string) ([]providercounts.Check, error)
}

// Report is the daily report: per provider and event type, the events received on one UTC day,
// how many of them are processed and how many are not. With an expected file it also holds the
// per-type difference from what the provider's dashboard counted.
type Report struct {
	Date     string              `json:"date"`
	Provider string              `json:"provider,omitempty"`
	Counts   []domain.DailyCount `json:"counts"`
	Totals   domain.DailyTotals  `json:"totals"`
	// BounceCategories counts the day's bounces and failures by bounce category (those whose
	// provider said why); absent when there were none.
	BounceCategories map[string]int64 `json:"bounce_categories,omitempty"`
	// Bounces is BounceCategories per provider and event type, for the CSV's column.
	Bounces []store.BounceCategoryCount `json:"-"`
	// ProviderCounts is the daily run's comparison with the providers' own counts, one row per
	// metric of each endpoint with a reconcile block; absent when none was compared that day.
	ProviderCounts []ProviderCount `json:"provider_counts,omitempty"`
	// ProviderGaps counts the ProviderCounts rows outside their tolerance.
	ProviderGaps int `json:"provider_gaps,omitempty"`
	// Expected, Tolerance and Mismatches are set by Compare.
	Expected   []Diff `json:"expected,omitempty"`
	Tolerance  int64  `json:"tolerance,omitempty"`
	Mismatches int    `json:"mismatches,omitempty"`
}

// ProviderCount is one metric of a provider's day beside what was received for it. When the
// provider's API did not answer (State unavailable or refused) there is one row for the
// endpoint, with no count and no gap: a missing count is not a zero.
type ProviderCount struct {
	Endpoint string `json:"endpoint"`
	Provider string `json:"provider"`
	State    string `json:"state"`
	Error    string `json:"error,omitempty"`
	Metric   string `json:"metric,omitempty"`
	// EventTypes are the received event types the metric is compared with ("Bounce*": every
	// type starting with Bounce).
	EventTypes    []string `json:"event_types,omitempty"`
	ProviderCount *int64   `json:"provider_count"`
	Received      int64    `json:"received"`
	Gap           *int64   `json:"gap"`
	Within        bool     `json:"within"`
	Note          string   `json:"note,omitempty"`
}

// ProviderRows flattens the checks into report rows.
func ProviderRows(checks []providercounts.Check) []ProviderCount {
	var out []ProviderCount
	for _, c := range checks {
		if c.State != providercounts.StateOK {
			out = append(out, ProviderCount{Endpoint: c.Endpoint, Provider: c.Provider, State: c.State, Error: c.Error})
			continue
		}
		for _, l := range c.Lines {
			count, gap := l.Count, l.Gap
			types := slices.Clone(l.Types)
			for _, p := range l.Prefixes {
				types = append(types, p+"*")
			}
			out = append(out, ProviderCount{Endpoint: c.Endpoint, Provider: c.Provider, State: c.State, Metric: l.Metric,
				EventTypes: types, ProviderCount: &count, Received: l.Received, Gap: &gap, Within: l.Within, Note: l.Note})
		}
	}
	return out
}

// Diff is one event type's received count against the provider's expected count.
type Diff struct {
	EventType   string `json:"event_type"`
	Received    int64  `json:"received"`
	Processed   int64  `json:"processed"`
	Unprocessed int64  `json:"unprocessed"`
	Expected    int64  `json:"expected"`
	Difference  int64  `json:"difference"` // received - expected
	Mismatch    bool   `json:"mismatch"`   // |difference| > tolerance
}

// ErrBadDate wraps a date that is not YYYY-MM-DD.
var ErrBadDate = errors.New("date must be YYYY-MM-DD")

// ParseDate parses a report date (YYYY-MM-DD, a UTC day); "" is the UTC day before now.
func ParseDate(s string, now time.Time) (time.Time, error) {
	if s == "" {
		y := now.UTC().AddDate(0, 0, -1)
		return time.Date(y.Year(), y.Month(), y.Day(), 0, 0, 0, 0, time.UTC), nil
	}
	d, err := time.Parse(domain.DateLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %q", ErrBadDate, s)
	}
	return d, nil
}

// DailyReport builds the report of date ("" = yesterday, UTC) for provider ("" = every one).
func (s *Service) DailyReport(ctx context.Context, date, provider string) (Report, error) {
	return BuildReport(ctx, s.Reports, date, provider, s.now())
}

// BuildReport reads the report of date ("" = the UTC day before now) from src.
func BuildReport(ctx context.Context, src ReportSource, date, provider string, now time.Time) (Report, error) {
	day, err := ParseDate(date, now)
	if err != nil {
		return Report{}, err
	}
	counts, err := src.DailyCounts(ctx, day, provider)
	if err != nil {
		return Report{}, err
	}
	bounces, err := src.DailyBounceCategories(ctx, day, provider)
	if err != nil {
		return Report{}, err
	}
	checks, err := src.ProviderCounts(ctx, day, provider)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Date: day.Format(domain.DateLayout), Provider: provider, Counts: counts, Totals: domain.SumCounts(counts),
		Bounces: bounces, ProviderCounts: ProviderRows(checks)}
	for _, c := range rep.ProviderCounts {
		if c.State == providercounts.StateOK && !c.Within {
			rep.ProviderGaps++
		}
	}
	for _, b := range bounces {
		if rep.BounceCategories == nil {
			rep.BounceCategories = map[string]int64{}
		}
		rep.BounceCategories[b.Category] += b.Count
	}
	return rep, nil
}

// ParseExpected reads a provider dashboard's export: CSV with columns event_type and count.
// A header row is optional; when present, the two columns are found by name (other columns
// are ignored), otherwise they are the first two. Blank lines are skipped; an event type listed
// twice is an error.
func ParseExpected(r io.Reader) (map[string]int64, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	raw = bytes.TrimPrefix(raw, []byte("\ufeff")) // spreadsheet exports often start with a BOM
	cr := csv.NewReader(bytes.NewReader(raw))
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	records, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("expected counts: %w", err)
	}
	typeCol, countCol := 0, 1
	out := map[string]int64{}
	for i, rec := range records {
		line := i + 1
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if i == 0 {
			if t, c, ok := headerColumns(rec); ok {
				typeCol, countCol = t, c
				continue
			}
		}
		if len(rec) <= max(typeCol, countCol) {
			return nil, fmt.Errorf("expected counts: line %d: want the columns event_type,count", line)
		}
		typ := strings.TrimSpace(rec[typeCol])
		n, err := strconv.ParseInt(strings.TrimSpace(rec[countCol]), 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("expected counts: line %d: count %q is not a non-negative integer", line, rec[countCol])
		}
		if typ == "" {
			return nil, fmt.Errorf("expected counts: line %d: empty event_type", line)
		}
		if _, dup := out[typ]; dup {
			return nil, fmt.Errorf("expected counts: line %d: event type %q is listed twice", line, typ)
		}
		out[typ] = n
	}
	return out, nil
}

// headerColumns finds event_type and count in a header row.
func headerColumns(rec []string) (int, int, bool) {
	t, c := -1, -1
	for i, f := range rec {
		switch strings.ToLower(strings.TrimSpace(f)) {
		case "event_type":
			t = i
		case "count":
			c = i
		}
	}
	return t, c, t >= 0 && c >= 0
}

// Compare sets the report's per-type difference from expected: every event type in either,
// received (ours) minus expected (theirs), a mismatch when the absolute difference exceeds
// tolerance. The report should be of one provider: a type's counts are summed over providers.
func (r *Report) Compare(expected map[string]int64, tolerance int64) {
	ours := map[string]*Diff{}
	for _, c := range r.Counts {
		d := ours[c.EventType]
		if d == nil {
			d = &Diff{EventType: c.EventType}
			ours[c.EventType] = d
		}
		d.Received += c.Received
		d.Processed += c.Processed
		d.Unprocessed += c.Unprocessed
	}
	for typ := range expected {
		if ours[typ] == nil {
			ours[typ] = &Diff{EventType: typ}
		}
	}
	r.Expected, r.Tolerance, r.Mismatches = []Diff{}, tolerance, 0
	for _, d := range ours {
		d.Expected = expected[d.EventType]
		d.Difference = d.Received - d.Expected
		d.Mismatch = d.Difference > tolerance || -d.Difference > tolerance
		if d.Mismatch {
			r.Mismatches++
		}
		r.Expected = append(r.Expected, *d)
	}
	slices.SortFunc(r.Expected, func(a, b Diff) int { return strings.Compare(a.EventType, b.EventType) })
}

// Formats of Write.
const (
	FormatTable = "table"
	FormatCSV   = "csv"
	FormatJSON  = "json"
)

// Write renders the report as a table, CSV or JSON. With an expected comparison, table and CSV
// show one line per event type with the expected count and the difference.
func (r Report) Write(w io.Writer, format string) error {
	switch format {
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case FormatCSV:
		return r.writeCSV(w)
	case FormatTable, "":
		return r.writeTable(w)
	default:
		return fmt.Errorf("unknown format %q (table, csv or json)", format)
	}
}

func (r Report) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	if r.Expected != nil {
		_ = cw.Write([]string{"date", "provider", "event_type", "received", "processed", "unprocessed", "expected", "difference", "status"})
		for _, d := range r.Expected {
			_ = cw.Write([]string{r.Date, r.Provider, d.EventType, i64(d.Received), i64(d.Processed), i64(d.Unprocessed),
				i64(d.Expected), i64(d.Difference), status(d)})
		}
	} else {
		// One more column rather than a second table: the file stays one table a spreadsheet
		// or a CSV reader takes as it is.
		_ = cw.Write([]string{"date", "provider", "event_type", "received", "processed", "unprocessed", "awaiting_start", "quarantined", "bounce_categories"})
		for _, c := range r.Counts {
			_ = cw.Write([]string{c.Date, c.Provider, c.EventType, i64(c.Received), i64(c.Processed), i64(c.Unprocessed), i64(c.AwaitingStart), i64(c.Quarantined),
				r.categoriesOf(c.Provider, c.EventType)})
		}
	}
	cw.Flush()
	return cw.Error()
}

func status(d Diff) string {
	if d.Mismatch {
		return "MISMATCH"
	}
	return "ok"
}

func (r Report) writeTable(w io.Writer) error {
	scope := "every provider"
	if r.Provider != "" {
		scope = "provider " + r.Provider
	}
	fmt.Fprintf(w, "Daily report %s (UTC), %s\n\n", r.Date, scope)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if r.Expected != nil {
		fmt.Fprintln(tw, "EVENT TYPE\tRECEIVED\tPROCESSED\tUNPROCESSED\tEXPECTED\tDIFF\tSTATUS")
		for _, d := range r.Expected {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%+d\t%s\n", d.EventType, d.Received, d.Processed, d.Unprocessed, d.Expected, d.Difference, status(d))
		}
	} else {
		fmt.Fprintln(tw, "PROVIDER\tEVENT TYPE\tRECEIVED\tPROCESSED\tUNPROCESSED\tAWAITING START\tQUARANTINED")
		for _, c := range r.Counts {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\n", c.Provider, c.EventType, c.Received, c.Processed, c.Unprocessed, c.AwaitingStart, c.Quarantined)
		}
		fmt.Fprintf(tw, "total\t\t%d\t%d\t%d\t%d\t%d\n", r.Totals.Received, r.Totals.Processed, r.Totals.Unprocessed, r.Totals.AwaitingStart, r.Totals.Quarantined)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.writeCategories(w); err != nil {
		return err
	}
	if err := r.writeProviderCounts(w); err != nil {
		return err
	}
	if r.Expected != nil {
		fmt.Fprintf(w, "\n%d of %d event types differ from the expected counts by more than %d\n", r.Mismatches, len(r.Expected), r.Tolerance)
	}
	return nil
}

// writeProviderCounts writes ProviderCounts as a table of its own.
func (r Report) writeProviderCounts(w io.Writer) error {
	if len(r.ProviderCounts) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tMETRIC\tEVENT TYPES\tPROVIDER COUNT\tRECEIVED\tGAP\tSTATUS")
	for _, c := range r.ProviderCounts {
		if c.State != providercounts.StateOK {
			fmt.Fprintf(tw, "%s\t\t\t-\t\t-\tprovider API %s: %s\n", c.Endpoint, c.State, c.Error)
			continue
		}
		st := "ok"
		if !c.Within {
			st = "GAP"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%+d\t%s\n", c.Endpoint, c.Metric, strings.Join(c.EventTypes, ","), *c.ProviderCount, c.Received, *c.Gap, st)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d provider counts differ from what was received by more than their tolerance (gap: the provider's count minus what was received)\n", r.ProviderGaps)
	return nil
}

// writeCategories writes BounceCategories as a table of its own, the most frequent first.
func (r Report) writeCategories(w io.Writer) error {
	if len(r.BounceCategories) == 0 {
		return nil
	}
	cats := slices.Collect(maps.Keys(r.BounceCategories))
	slices.SortFunc(cats, func(a, b string) int {
		if c := cmp.Compare(r.BounceCategories[b], r.BounceCategories[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BOUNCE CATEGORY\tBOUNCES")
	for _, c := range cats {
		fmt.Fprintf(tw, "%s\t%d\n", c, r.BounceCategories[c])
	}
	return tw.Flush()
}

// categoriesOf is the CSV's bounce_categories cell of one provider and event type:
// category=count pairs joined by ';', in category order, or "" when none bounced.
func (r Report) categoriesOf(provider, eventType string) string {
	var parts []string
	for _, b := range r.Bounces {
		if b.Provider == provider && b.EventType == eventType {
			parts = append(parts, b.Category+"="+strconv.FormatInt(b.Count, 10))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ";")
}

// ReportOptions are `mailhook report daily`'s flags.
type ReportOptions struct {
	Date     string // YYYY-MM-DD; "" = yesterday (UTC)
	Provider string
	Format   string // table, csv or json
	// Expected is a CSV file (event_type,count) of what the provider counted; needs Provider.
	Expected  string
	Tolerance int64
	Now       func() time.Time
}

// Validate checks the options that need no database.
func (o ReportOptions) Validate() error {
	if o.Expected != "" && o.Provider == "" {
		return errors.New("--expected needs --provider: a dashboard's export counts one provider")
	}
	if o.Tolerance < 0 {
		return errors.New("--tolerance must not be negative")
	}
	switch o.Format {
	case "", FormatTable, FormatCSV, FormatJSON:
	default:
		return fmt.Errorf("unknown --format %q (table, csv or json)", o.Format)
	}
	if _, err := ParseDate(o.Date, time.Now()); err != nil {
		return err
	}
	return nil
}

// ErrMismatch is returned (wrapped) when some event type differs from the expected counts by
// more than the tolerance: the command exits non-zero.
var ErrMismatch = errors.New("counts differ from the expected counts")

// RunDailyReport is `mailhook report daily`: it writes the report in the chosen format to out
// and, with an expected file, returns an error wrapping ErrMismatch when any event type
// differs by more than the tolerance.
func RunDailyReport(ctx context.Context, src ReportSource, o ReportOptions, out io.Writer) error {
	if err := o.Validate(); err != nil {
		return err
	}
	var expected map[string]int64
	if o.Expected != "" {
		f, err := os.Open(o.Expected)
		if err != nil {
			return err
		}
		expected, err = ParseExpected(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", o.Expected, err)
		}
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	rep, err := BuildReport(ctx, src, o.Date, o.Provider, now())
	if err != nil {
		return err
	}
	if expected != nil {
		rep.Compare(expected, o.Tolerance)
	}
	if err := rep.Write(out, o.Format); err != nil {
		return err
	}
	if rep.Mismatches > 0 {
		return fmt.Errorf("%w: %d of %d event types of %s on %s differ by more than %d from %s",
			ErrMismatch, rep.Mismatches, len(rep.Expected), rep.Provider, rep.Date, rep.Tolerance, o.Expected)
	}
	return nil
}
