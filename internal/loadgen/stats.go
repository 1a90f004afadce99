package loadgen

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of sorted values: the
// smallest value such that at least p% of the values are less than or equal to it. It returns
// 0 for no values.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	if p <= 0 {
		return sorted[0]
	}
	// ceil(p/100 * n) computed in integers (p to 1e-6 precision), so 99% of 100 is exactly 99.
	n := int64(len(sorted))
	k := (int64(p*1e6+0.5)*n + 100e6 - 1) / 100e6
	if k < 1 {
		k = 1
	}
	if k > n {
		k = n
	}
	return sorted[k-1]
}

// Summary describes a set of latencies.
type Summary struct {
	Count int           `json:"count"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns"`
	P95   time.Duration `json:"p95_ns"`
	P99   time.Duration `json:"p99_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Summarize sorts a copy of values and summarizes it.
func Summarize(values []time.Duration) Summary {
	if len(values) == 0 {
		return Summary{}
	}
	s := slices.Clone(values)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return Summary{
		Count: len(s), Mean: sum / time.Duration(len(s)),
		P50: Percentile(s, 50), P95: Percentile(s, 95), P99: Percentile(s, 99), Max: s[len(s)-1],
	}
}

func (s Summary) String() string {
	if s.Count == 0 {
		return "n=0"
	}
	return fmt.Sprintf("n=%d p50=%s p95=%s p99=%s max=%s", s.Count, ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max))
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + "ms" }

// Latencies collects durations by label; safe for concurrent use.
type Latencies struct {
	mu sync.Mutex
	by map[string][]time.Duration
}

// Add records d under label.
func (l *Latencies) Add(label string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[string][]time.Duration{}
	}
	l.by[label] = append(l.by[label], d)
}

// Summaries summarizes every label, plus "all" over every label given in all (nil: none).
func (l *Latencies) Summaries(all ...string) map[string]Summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]Summary{}
	var merged []time.Duration
	for k, v := range l.by {
		out[k] = Summarize(v)
		if slices.Contains(all, k) {
			merged = append(merged, v...)
		}
	}
	if len(all) > 0 {
		out["all"] = Summarize(merged)
	}
	return out
}

// Counter counts by label; safe for concurrent use.
type Counter struct {
	mu sync.Mutex
	by map[string]int
}

// Inc adds n to label.
func (c *Counter) Inc(label string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]int{}
	}
	c.by[label] += n
}

// Snapshot copies the counts.
func (c *Counter) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.by))
	for k, v := range c.by {
		out[k] = v
	}
	return out
}

// CPUTarget names processes whose CPU time is reported: fixed pids (temporal=1234,
// pg=11+12+13), every process of a user at each sample (postgres=user:postgres), or a process
// and its descendants at each sample (pg=tree:4321: one PostgreSQL cluster's postmaster and
// its backends, not the other clusters of the same user), so connections opened during the run
// count too.
type CPUTarget struct {
	Label string
	PIDs  []int
	User  string
	Tree  int
}

// ParseCPUTargets parses label=pid[+pid…], label=user:NAME and label=tree:PID values.
func ParseCPUTargets(values []string) ([]CPUTarget, error) {
	var out []CPUTarget
	for _, v := range values {
		label, list, ok := strings.Cut(v, "=")
		if !ok || label == "" || list == "" {
			return nil, fmt.Errorf("--cpu %q: want label=pid[+pid…] or label=user:NAME", v)
		}
		t := CPUTarget{Label: label}
		if u, ok := strings.CutPrefix(list, "user:"); ok {
			if _, err := userUID(u); err != nil {
				return nil, fmt.Errorf("--cpu %q: %w", v, err)
			}
			t.User = u
			out = append(out, t)
			continue
		}
		if root, ok := strings.CutPrefix(list, "tree:"); ok {
			pid, err := strconv.Atoi(root)
			if err != nil || pid <= 0 {
				return nil, fmt.Errorf("--cpu %q: %q is not a pid", v, root)
			}
			t.Tree = pid
			out = append(out, t)
			continue
		}
		for _, p := range strings.FieldsFunc(list, func(r rune) bool { return r == '+' || r == ',' || r == ' ' }) {
			pid, err := strconv.Atoi(p)
			if err != nil || pid <= 0 {
				return nil, fmt.Errorf("--cpu %q: %q is not a pid", v, p)
			}
			t.PIDs = append(t.PIDs, pid)
		}
		out = append(out, t)
	}
	return out, nil
}

// userUID looks a user name up in /etc/passwd.
func userUID(name string) (string, error) {
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) > 2 && f[0] == name {
			return f[2], nil
		}
	}
	return "", fmt.Errorf("no user %q", name)
}

// userPIDs lists the processes whose real uid is uid.
func userPIDs(uid string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(rest); len(f) > 0 && f[0] == uid {
					out = append(out, pid)
				}
				break
			}
		}
	}
	return out
}

// treePIDs lists root and every process descended from it, from each process's parent in
// /proc/<pid>/stat.
func treePIDs(root int) []int {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		// After ')': state, then ppid.
		if f := strings.Fields(s[i+1:]); len(f) > 1 {
			if pp, err := strconv.Atoi(f[1]); err == nil {
				parent[pid] = pp
			}
		}
	}
	var out []int
	for pid := range parent {
		for p, hops := pid, 0; p > 0 && hops < 64; p, hops = parent[p], hops+1 {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports for /proc accounting.
const clockTicks = 100

// ProcCPU returns the user+system CPU time a process has used (its threads included), from
// /proc/<pid>/stat; pid 0 means this process. Exited processes count as zero.
func ProcCPU(pid int) time.Duration {
	path := "/proc/self/stat"
	if pid > 0 {
		path = fmt.Sprintf("/proc/%d/stat", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields after the last ')' are fixed.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	// After ')': state is field 3, utime field 14, stime field 15 → indices 11 and 12 here.
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	sy, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+sy) * time.Second / clockTicks
}

// CPUSample is the CPU time of every process of each target (and "self", this process) at
// one moment.
type CPUSample struct {
	At  time.Time
	CPU map[string]map[int]time.Duration
}

// machineCPU is the CPU time every processor spent busy (not idle or waiting for I/O) since
// boot, from /proc/stat.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return time.Duration(busy) * time.Second / clockTicks
}

// SampleCPU reads the CPU time of every target now, of this process ("self"), and of the whole
// machine ("machine": what the other labels leave of it is someone else's work).
func SampleCPU(targets []CPUTarget) CPUSample {
	s := CPUSample{At: time.Now(), CPU: map[string]map[int]time.Duration{"self": {0: ProcCPU(0)}, "machine": {0: machineCPU()}}}
	for _, t := range targets {
		pids := t.PIDs
		if t.User != "" {
			if uid, err := userUID(t.User); err == nil {
				pids = userPIDs(uid)
			}
		}
		if t.Tree > 0 {
			pids = treePIDs(t.Tree)
		}
		m := map[int]time.Duration{}
		for _, p := range pids {
			// A process that exited after it was listed reads as 0: leave it out, so it is
			// lost (see CPUUse) instead of counting its whole past as negative use.
			if c := ProcCPU(p); c > 0 {
				m[p] = c
			}
		}
		s.CPU[t.Label] = m
	}
	return s
}

// CPUUse is how many cores each target kept busy between two samples. A process that appeared
// in between counts from its start; one that exited in between is lost.
func CPUUse(from, to CPUSample) map[string]float64 {
	wall := to.At.Sub(from.At).Seconds()
	out := map[string]float64{}
	if wall <= 0 {
		return out
	}
	for label, secs := range CPUSeconds(from, to) {
		out[label] = secs / wall
	}
	return out
}

// CPUSeconds is the CPU time each target used between two samples, counted as CPUUse counts.
func CPUSeconds(from, to CPUSample) map[string]float64 {
	out := map[string]float64{}
	for label, pids := range to.CPU {
		var used time.Duration
		for pid, v := range pids {
			// Less than before: the pid was reused by a newer process; count it from its start.
			if d := v - from.CPU[label][pid]; d > 0 {
				used += d
			} else if d < 0 {
				used += v
			}
		}
		out[label] = used.Seconds()
	}
	return out
}

// ProcMemory returns a process's VmHWM (peak resident set) and VmRSS in bytes.
func ProcMemory(pid int) (hwm, rss int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		for _, k := range []string{"VmHWM:", "VmRSS:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				fs := strings.Fields(v)
				if len(fs) == 0 {
					continue
				}
				kb, _ := strconv.ParseInt(fs[0], 10, 64)
				if k == "VmHWM:" {
					hwm = kb << 10
				} else {
					rss = kb << 10
				}
			}
		}
	}
	return hwm, rss, sc.Err()
}
