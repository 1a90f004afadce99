package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// The suite's PostgreSQL connections add up as docs/TESTING.md ("PostgreSQL connections") says,
// from the constants the tests claim and size their pools by, to the NEED that
// scripts/check-pg-connections.sh checks for; and the biggest claims fit in internal/e2e's
// budget, or their tests would wait for ever. A change to a pool's size, the package's budget
// or the table fails here until the other two follow. No database: it runs under -short.
func TestConnectionBudgetAddsUp(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "TESTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	if i := strings.Index(doc, "## PostgreSQL connections"); i < 0 {
		t.Fatal(`docs/TESTING.md has no "## PostgreSQL connections" section`)
	} else {
		doc = doc[i:]
	}
	// most is the last cell, a number, of the table row that starts with who.
	most := func(who string) int {
		t.Helper()
		for _, line := range strings.Split(doc, "\n") {
			if !strings.HasPrefix(line, "| "+who) {
				continue
			}
			cells := strings.Split(strings.Trim(line, "| "), "|")
			n, err := strconv.Atoi(strings.Trim(cells[len(cells)-1], " *"))
			if err != nil {
				t.Fatalf("docs/TESTING.md row %q: its last cell is not a number", line)
			}
			return n
		}
		t.Fatalf("docs/TESTING.md has no row starting %q", who)
		return 0
	}
	contains := func(who, want string) {
		t.Helper()
		for _, line := range strings.Split(doc, "\n") {
			if strings.HasPrefix(line, "| "+who) && !strings.Contains(line, want) {
				t.Errorf("docs/TESTING.md row %q does not say %q", line, want)
			}
		}
	}

	otherTest := storetest.PoolMaxConns + storetest.TestPoolMaxConns
	const otherAtOnce, otherAdmin = 2, 2
	for _, c := range []struct {
		who  string
		want int
	}{
		{"internal/e2e, its tests' claims", e2eConnBudget},
		{"· a harness", e2eParallel * harnessConns},
		{"· a real Temporal server", testenv.RealServerConns},
		{"another package's tests", otherAtOnce * otherTest},
		{"another package's admin connections", otherAdmin},
		{"**a `make test` run**", e2eConnBudget + otherAtOnce*otherTest + otherAdmin},
	} {
		if got := most(c.who); got != c.want {
			t.Errorf("docs/TESTING.md says %d for %q; the code makes it %d", got, c.who, c.want)
		}
	}
	contains("· a harness", "`storetest.PoolMaxConns` "+strconv.Itoa(storetest.PoolMaxConns)+" + `TestPoolMaxConns` "+strconv.Itoa(storetest.TestPoolMaxConns))
	contains("· a real Temporal server", strconv.Itoa(testenv.RealServerMaxConns)+" main + "+strconv.Itoa(testenv.RealServerVisibilityMaxConns)+" visibility")
	contains("· mailhook processes", strconv.Itoa(procEnvConns(2))+" (two), "+strconv.Itoa(procEnvConns(3))+" (three)")
	contains("· mailhook processes", strconv.Itoa(storetest.TestPoolMaxConns)+" + "+strconv.Itoa(procPoolMaxConns)+" each")
	contains("· an upgrade", strconv.Itoa(upgradeEnvConns))

	suite := e2eConnBudget + otherAtOnce*otherTest + otherAdmin
	script, err := os.ReadFile(filepath.Join("..", "..", "scripts", "check-pg-connections.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`NEED=\$\{NEED:-(\d+)\}`).FindSubmatch(script)
	if m == nil {
		t.Fatal("scripts/check-pg-connections.sh: no NEED=${NEED:-N}")
	}
	if need, _ := strconv.Atoi(string(m[1])); need != suite {
		t.Errorf("scripts/check-pg-connections.sh needs %d; the budget adds up to %d", need, suite)
	}
	// Two runs in a new machine's PostgreSQL: max_connections 100 less the superuser's 3.
	if 2*suite > 97 {
		t.Errorf("a run's budget %d: two runs do not fit in 97 connections", suite)
	}

	// What one test claims at most fits in the package's budget (else it would wait for ever),
	// and the tests that run beside each other by design fit together.
	for _, c := range []struct {
		what string
		n    int
	}{
		{"-parallel 4 harnesses", e2eParallel * harnessConns},
		{"four harnesses in one test (TestRecordScenarioHistories)", 4 * harnessConns},
		{"three mailhook processes (TestSinkDeliveryAcrossProcesses)", procEnvConns(3)},
		{"a real server and a harness (TestCoreLifecycleOnARealTemporalServer)", testenv.RealServerConns + harnessConns},
		{"a real server and an upgrade (TestRollingUpgradeWithRunsInFlight)", testenv.RealServerConns + upgradeEnvConns},
	} {
		if c.n > e2eConnBudget {
			t.Errorf("%s claim %d connections, more than internal/e2e's budget of %d", c.what, c.n, e2eConnBudget)
		}
	}
}
