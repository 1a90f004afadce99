package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"

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
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
)

// Every relative link and picture in the README and docs/ names a file that exists and, with a
// #fragment, a heading of it: a page moved, a heading renamed or a screenshot dropped fails here.
func TestDocsLinkOnlyToFilesAndHeadingsThatExist(t *testing.T) {
	checked := 0
	for _, file := range testenv.DocFiles(t, "../..") {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(raw), -1) {
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
	if checked < 20 {
		t.Fatalf("only %d links checked: is the pattern still right?", checked)
	}
}

// headingSlugs are the anchors GitHub gives a page's headings: lower case, spaces as hyphens,
// other punctuation dropped.
func headingSlugs(doc string) []string {
	var out []string
	for _, m := range mdHeading.FindAllStringSubmatch(doc, -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(m[1])) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}
