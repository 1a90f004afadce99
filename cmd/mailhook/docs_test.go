package main

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/mailhook/mailhook/internal/simulate"
	"github.com/mailhook/mailhook/internal/testenv"
)

var (
	inlineCommand = regexp.MustCompile("`(?:bin/)?mailhook ([^`]+)`")
	blockCommand  = regexp.MustCompile(`^\s*(?:\$ )?(?:bin/)?mailhook (.+)$`)
	flagName      = regexp.MustCompile(`--([a-z][a-z-]*)`)
)

// Every mailhook command the README and docs/ show exists, with the flags they give it: a
// command renamed or a flag dropped fails here, not in a reader's terminal.
func TestDocsShowOnlyCommandsAndFlagsThatExist(t *testing.T) {
	files := testenv.DocFiles(t, "../..")
	rootCmd := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
	// What cobra adds only when it executes: the help command and --version.
	rootCmd.InitDefaultHelpCmd()
	rootCmd.InitDefaultVersionFlag()
	var wrong []string
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var shown []string
		inBlock := false
		for line := range strings.SplitSeq(string(raw), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inBlock = !inBlock
				continue
			}
			if inBlock {
				if m := blockCommand.FindStringSubmatch(line); m != nil {
					shown = append(shown, m[1])
				}
				continue
			}
			for _, m := range inlineCommand.FindAllStringSubmatch(line, -1) {
				shown = append(shown, m[1])
			}
		}
		for _, s := range shown {
			s, _, _ = strings.Cut(s, "#") // a comment after the command
			for _, alt := range alternatives(s) {
				if problem := checkShownCommand(rootCmd, alt); problem != "" {
					wrong = append(wrong, filepath.Base(f)+": mailhook "+strings.TrimSpace(alt)+": "+problem)
				}
				checked++
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d commands found in the docs: the patterns no longer match how they are written", checked)
	}
	slices.Sort(wrong)
	if wrong = slices.Compact(wrong); len(wrong) > 0 {
		t.Errorf("the docs show commands or flags that do not exist:\n%s", strings.Join(wrong, "\n"))
	}
}

// checkShownCommand resolves the words of s to a command and checks its --flags; "" when all exist.
func checkShownCommand(rootCmd *cobra.Command, s string) string {
	words := strings.Fields(s)
	cmd := rootCmd
	for len(words) > 0 {
		next, _, err := cmd.Find([]string{words[0]})
		if err != nil || next == cmd || next.Name() != words[0] {
			break
		}
		cmd, words = next, words[1:]
	}
	if cmd == rootCmd && !strings.HasPrefix(s, "--") {
		return "no such command"
	}
	for _, m := range flagName.FindAllStringSubmatch(strings.Join(words, " "), -1) {
		if m[1] == "help" {
			continue
		}
		if cmd.Flags().Lookup(m[1]) == nil && cmd.InheritedFlags().Lookup(m[1]) == nil {
			return "no flag --" + m[1]
		}
	}
	return ""
}

// alternatives expands a synopsis of subcommands, "sinks list|pause NAME|redeliver NAME [--since]",
// into one command each; the options after it belong to the last. A | among the options
// (--format table|json) is a choice of value, not of command.
func alternatives(s string) []string {
	end := len(s)
	for _, mark := range []string{" [", " --"} {
		if i := strings.Index(s, mark); i >= 0 && i < end {
			end = i
		}
	}
	head, rest := s[:end], s[end:]
	if !strings.Contains(head, "|") {
		return []string{s}
	}
	parts := strings.Split(head, "|")
	first := strings.Fields(parts[0])
	base := strings.Join(first[:len(first)-1], " ")
	out := []string{base + " " + first[len(first)-1]}
	for _, p := range parts[1:] {
		out = append(out, base+" "+p)
	}
	out[len(out)-1] += rest
	return out
}

// The README is the front door, not the manual (docs/ holds that): 12 KiB at most.
func TestTheREADMEStaysAFrontDoor(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 12<<10 {
		t.Errorf("README.md is %d bytes; keep it to 12 KiB and move the rest to docs/", len(raw))
	}
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`^#{1,6} (.+)$`)
	// docRef is a mention of a page of docs/ in a Go comment or string, a script, a config or an
	// alert: the page's path, then an #anchor, or a heading in quotes after a space, a comma or
	// a parenthesis (in a JSON string the quotes are escaped).
	docRef = regexp.MustCompile(`\bdocs/([A-Za-z0-9_./-]+\.md)(?:#([a-z0-9_-]+))?(?:(?:,\s*|\s+|\s*\()\(?\\?"([^"\\(){}]{1,80})\\?")?`)
	// commentBreak joins what a comment or a wrapped string continues on its next line.
	commentBreak = regexp.MustCompile(`\n[ \t]*(?://|#|--)?[ \t]*`)
)

// maxDocBytes bounds every page under docs/: a page longer than this is a log, not a manual
// (issue 39). Pictures are not pages.
const maxDocBytes = 30 << 10

// allDocPages are README.md and every markdown file under docs/, the dated runs under
// docs/benchmarks/ included.
func allDocPages(t *testing.T) []string {
	t.Helper()
	files := []string{"../../README.md"}
	err := filepath.WalkDir("../../docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("found only %d doc pages: run from cmd/mailhook", len(files))
	}
	return files
}

// No page under docs/ is over 30 KiB: today's figures, runbooks and the design fit on pages a
// reader can take in, and dated runs go to docs/benchmarks/, one file each.
func TestNoDocFileIsOver30KiB(t *testing.T) {
	checked := 0
	err := filepath.WalkDir("../../docs", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".png", ".jpg", ".jpeg", ".gif", ".webp":
			return nil // a screenshot, not a page
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		checked++
		if info.Size() > maxDocBytes {
			t.Errorf("%s is %d bytes, over %d: split it by topic (dated runs go to docs/benchmarks/, history to git)", path, info.Size(), maxDocBytes)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 30 {
		t.Fatalf("only %d files checked under docs/", checked)
	}
}

// Every relative link and picture in the README and docs/ (dated runs included) names a file
// that exists and, with a #fragment, a heading of it: a page moved, a heading renamed or a
// screenshot dropped fails here.
func TestDocsLinkOnlyToFilesAndHeadingsThatExist(t *testing.T) {
	checked := 0
	for _, file := range allDocPages(t) {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(outsideCodeBlocks(string(raw)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, fragment, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
			}
			body, err := os.ReadFile(dest)
			if err != nil {
				if info, serr := os.Stat(dest); serr == nil && info.IsDir() {
					checked++
					continue
				}
				t.Errorf("%s links to %s, which does not exist", file, target)
				continue
			}
			checked++
			if fragment != "" && !slices.Contains(headingSlugs(string(body)), fragment) {
				t.Errorf("%s links to %s: %s has no such heading", file, target, dest)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d links checked: is the pattern still right?", checked)
	}
}

var labelledLink = regexp.MustCompile(`\[(?:docs/)?([\w./-]+\.md)\]\(([^)\s#]*)[^)\s]*\)`)

// A link labelled with a page's name leads to that page: "[API.md](ARCHITECTURE.md#…)" sent a
// reader of TEMPORAL.md elsewhere than it said (issue 44).
func TestALinkLabelledWithAPageLeadsToIt(t *testing.T) {
	checked := 0
	for _, file := range allDocPages(t) {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range labelledLink.FindAllStringSubmatch(outsideCodeBlocks(string(raw)), -1) {
			label, target := m[1], m[2]
			if target == "" {
				target = filepath.Base(file)
			}
			checked++
			if filepath.Base(target) != filepath.Base(label) {
				t.Errorf("%s: a link labelled %s leads to %s", file, label, m[0])
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d labelled links checked: is the pattern still right?", checked)
	}
}

// Every mention of a page of docs/ in the code, scripts, config and alerts, with a heading in
// quotes or an #anchor, names a page that exists and a heading it has: a comment or help text
// that sends a reader to a section moved away fails here.
func TestDocMentionsInTheTreeNameExistingPagesAndHeadings(t *testing.T) {
	checked := 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".sh", ".yml", ".yaml", ".sql", ".json", ".md", ".cjs":
		default:
			if d.Name() != "Makefile" {
				return nil
			}
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := commentBreak.ReplaceAllString(string(raw), " ")
		for _, m := range docRef.FindAllStringSubmatch(text, -1) {
			page := filepath.Join("../../docs", m[1])
			body, err := os.ReadFile(page)
			if err != nil {
				t.Errorf("%s mentions docs/%s, which does not exist", path, m[1])
				continue
			}
			checked++
			slugs := headingSlugs(string(body))
			if m[2] != "" && !slices.Contains(slugs, m[2]) {
				t.Errorf("%s mentions docs/%s#%s: no such heading", path, m[1], m[2])
			}
			if m[3] != "" && !slices.Contains(slugs, slug(m[3])) {
				t.Errorf("%s mentions docs/%s %q: no such heading", path, m[1], m[3])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("only %d mentions of doc pages found: is the pattern still right?", checked)
	}
}

// Every provider page says how to try the provider locally, and for each provider simulate
// speaks, with the simulate command that plays it (issue 44).
func TestEveryProviderPageSaysHowToTryItLocally(t *testing.T) {
	pages, err := filepath.Glob("../../docs/providers/*.md")
	if err != nil || len(pages) < 5 {
		t.Fatalf("provider pages: %v %v", pages, err)
	}
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(headingSlugs(string(raw)), "try-it-locally") {
			t.Errorf("%s has no \"Try it locally\" section", page)
		}
		name := strings.TrimSuffix(filepath.Base(page), ".md")
		if simulate.Speaks(name) && !strings.Contains(string(raw), "mailhook simulate --provider "+name) {
			t.Errorf("%s does not show mailhook simulate --provider %s", page, name)
		}
	}
	for _, p := range simulate.Providers[1:] {
		if _, err := os.Stat("../../docs/providers/" + p + ".md"); err != nil {
			t.Errorf("simulate speaks %s, which has no provider page", p)
		}
	}
}

// runbookBase is where an alert's runbook_url points: the runbooks on the repository's main
// branch, so the link opens from the alerting tool, outside any checkout.
const runbookBase = "https://github.com/mailhook/mailhook/blob/main/docs/operations/alerts.md#"

// Every alert of deploy/prometheus/alerts.yml has its runbook, a section of
// docs/operations/alerts.md under its name, and links it from its runbook_url annotation:
// whoever is paged finds what to do, from the page itself.
func TestEveryAlertHasARunbook(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	runbooks, err := os.ReadFile("../../docs/operations/alerts.md")
	if err != nil {
		t.Fatal(err)
	}
	slugs := headingSlugs(string(runbooks))
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue // a recording rule
			}
			alerts++
			if !slices.Contains(slugs, slug(r.Alert)) {
				t.Errorf("alert %s has no section in docs/operations/alerts.md", r.Alert)
			}
			if got, want := r.Annotations["runbook_url"], runbookBase+slug(r.Alert); got != want {
				t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, got, want)
			}
		}
	}
	if alerts < 5 {
		t.Fatalf("only %d alerts found in alerts.yml", alerts)
	}
}

// outsideCodeBlocks blanks the fenced code blocks of a markdown page: a "# comment" in a shell
// block is not a heading, and a link inside one is not followed.
func outsideCodeBlocks(doc string) string {
	lines := strings.Split(doc, "\n")
	inBlock := false
	for i, line := range lines {
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		if fence {
			inBlock = !inBlock
		}
		if fence || inBlock {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// headingSlugs are the anchors GitHub gives a page's headings: lower case, spaces as hyphens,
// punctuation other than - and _ dropped, and -1, -2, … after a heading's second and later
// occurrences.
func headingSlugs(doc string) []string {
	var out []string
	seen := map[string]int{}
	for line := range strings.SplitSeq(outsideCodeBlocks(doc), "\n") {
		m := mdHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", s, n))
		} else {
			out = append(out, s)
		}
		seen[s]++
	}
	return out
}

// slug is GitHub's anchor of one heading's text.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
