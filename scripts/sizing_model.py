#!/usr/bin/env python3
"""mailhook's sizing and cost model, from the sizing phase's runs (scripts/sizing.sh).

Each run directory holds, per run N, runN-sizing.json (mailhook-loadtest's report) and its
sidecars: .tables-before.tsv/.tables-after.tsv (table, total bytes, index bytes, rows),
.temporal-before.prom/.temporal-after.prom (the Temporal server's metrics),
.worker-before.prom/.worker-after.prom (the worker's), .worker-memory and .tree.

The formulas are docs/operations/sizing.md's; keep the two in step.
"""
import glob
import json
import math
import os
import re
import statistics
import sys

DAY = 86400.0
MONTH_DAYS = 30  # a month of traffic, for the bills
GBH_PER_GB_MONTH = 744  # Temporal Cloud: "1 GB equals 744 GBh"
# Temporal Cloud prices, https://docs.temporal.io/cloud/pricing as read on 2026-12-06
# (temporalio/documentation docs/evaluate/cloud/pricing.mdx at 0217b718): Pay-As-You-Go actions
# per million, by the month's volume on the Business plan and above; the Developer plan pays $50
# at every volume. Storage per GBh.
PAYG_TIERS = [(5, 50.0), (5, 45.0), (10, 40.0), (30, 35.0), (50, 30.0), (100, 25.0)]  # (millions, $/M)
PAYG_BEYOND = 25.0  # over 200 M: "contact Sales"; priced here at the last published tier
RETAINED_PER_GBH = 0.00105
ACTIVE_PER_GBH = 0.042
# mailhook's default retention (internal/config/retention.go, docs/operations/retention.md):
# keys and what is deleted with them 400 days; payloads and notification bodies 30 days, in
# monthly partitions dropped once their whole month is past: up to about 62 days.
KEY_DAYS = 400
PAYLOAD_DAYS_MIN, PAYLOAD_DAYS_MAX = 30, 62
RETENTION_CLASS = {
    "webhook_events": "keys", "notifications": "keys", "replays": "keys",
    "event_payloads": "payloads", "notification_bodies": "payloads",
    "messages": "kept", "message_events": "kept", "suppressions": "kept", "suppression_lifts": "kept",
    "daily_counts": "kept", "soft_bounces": "kept", "provider_counts": "kept",
}
# Outages, from docs/BENCHMARKS.md (real server): a refusing sink costs probes, not work per
# parked notification; an event accepted through Temporal while PostgreSQL is down costs one
# RecordAccepted activity and its retries (1.35 attempts) and a workflow task beyond a normal run,
# and 3.6 KB of history instead of 2.2 KB.
# A probe is an activity, a timer and a workflow task of local activities: 3 actions, at most
# one a minute once open (notify.max_probe_interval) and ~10 while the circuit opens.
SINK_OUTAGE_ACTIONS_PER_HOUR = 3 * (60 + 10)
DRAIN_BATCH = 100  # an HTTP drainer sends 100 parked notifications per activity task (BENCHMARKS)
DRAIN_ACTIONS_PER_BATCH = 2  # the activity and its workflow task's markers
PG_OUTAGE_EXTRA_ACTIONS = 1.35  # RecordAccepted attempts per event accepted through Temporal
PG_OUTAGE_EXTRA_HISTORY = 3600 - 2200
SHARD_UTILISATION = 0.5  # a history shard's persistence calls are serial: keep each half busy
POLL_RTT_S = 0.010  # a worker's poll round trip to the frontend, in-cluster; Cloud: 20-50 ms


def prom(path):
    """Prometheus text → {(name, frozenset(labels)): value}."""
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path, encoding="utf-8", errors="replace"):
        if not line or line[0] == "#":
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)", line)
        if not m:
            continue
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        try:
            out[(m.group(1), labels)] = float(m.group(4))
        except ValueError:
            pass
    return out


def delta(before, after, name, where=lambda labels: True):
    total = 0.0
    found = False
    for (n, labels), v in after.items():
        if n == name and where(dict(labels)):
            total += v - before.get((n, labels), 0.0)
            found = True
    return total if found else None


def mean_of(before, after, base, where=lambda labels: True):
    """Δsum/Δcount of a histogram or summary between two scrapes."""
    s = delta(before, after, base + "_sum", where)
    c = delta(before, after, base + "_count", where)
    return s / c if s is not None and c else None


def tables(path):
    out = {}
    if os.path.exists(path):
        for line in open(path):
            f = line.rstrip("\n").split("\t")
            if len(f) == 4:
                out[f[0]] = (int(f[1]), int(f[2]), int(f[3]))
    return out


def run_inputs(json_path):
    """The per-event figures of one sizing run."""
    base = json_path[: -len(".json")]
    j = json.load(open(json_path))
    n = j["events_accepted"]
    pe = j.get("per_event") or {}
    pg = (j.get("pg") or {}).get("per_event") or {}
    r = {
        "run": os.path.basename(base), "events": n, "passed": j.get("passed"),
        "tree": open(base + ".tree").read().strip() if os.path.exists(base + ".tree") else "?",
        "loadavg_start": j.get("loadavg_start"), "loadavg_send_end": j.get("loadavg_send_end"),
        "processed_per_sec": j.get("processed_per_sec_overall"),
        "starts": pe.get("starts"), "workflow_tasks": pe.get("workflow_tasks"), "activity_tasks": pe.get("activity_tasks"),
        "history_bytes": pe.get("history_bytes"), "history_events": pe.get("history_events"),
        "notifications": j["notifications"]["expected"] / n if n else None,
        "pg_round_trips": pg.get("round_trips"), "pg_statements": pg.get("statements"),
        "pg_rows_written": pg.get("rows_written"), "pg_wal_bytes": pg.get("wal_bytes"),
    }
    for label, secs in (j.get("cpu_seconds_run") or {}).items():
        if label in ("http", "worker", "temporal", "postgres"):
            r["cpu_ms_" + label] = 1000 * secs / n
    tb, ta = prom(base + ".temporal-before.prom"), prom(base + ".temporal-after.prom")
    # The frontend's count for mailhook's namespace: the server's own system workflows
    # (namespace temporal_system) are not mailhook's, and Temporal Cloud bills none of them.
    ns = os.environ.get("TEMPORAL_NAMESPACE", "default")
    a = delta(tb, ta, "action", lambda l: l.get("service_name") == "frontend" and l.get("namespace") == ns)
    r["actions"] = a / n if a is not None and n else None
    r["actions_by_type"] = {}
    for (name, labels), v in ta.items():
        l = dict(labels)
        if name == "action" and l.get("service_name") == "frontend" and l.get("namespace") == ns and n:
            d = v - tb.get((name, labels), 0.0)
            if d:
                r["actions_by_type"][l.get("action_type", "?")] = d / n
    hist = lambda l: l.get("service_name") == "history"
    writes = lambda l: hist(l) and l.get("operation") in ("UpdateWorkflowExecution", "CreateWorkflowExecution", "ConflictResolveWorkflowExecution")
    w = delta(tb, ta, "persistence_requests", writes)
    r["history_writes"] = w / n if w is not None and n else None
    r["history_write_ms"] = None
    lat = mean_of(tb, ta, "persistence_latency", writes)
    if lat is not None:
        r["history_write_ms"] = lat * 1000
    wb, wa = prom(base + ".worker-before.prom"), prom(base + ".worker-after.prom")
    for key, base_name in (("wft_schedule_to_start_ms", "temporal_workflow_task_schedule_to_start_latency_seconds"),
                           ("workflow_e2e_ms", "temporal_workflow_endtoend_latency_seconds")):
        v = mean_of(wb, wa, base_name)
        r[key] = v * 1000 if v is not None else None
    before, after = tables(base + ".tables-before.tsv"), tables(base + ".tables-after.tsv")
    r["tables"] = {}
    for t, (total, idx, rows) in after.items():
        b = before.get(t, (0, 0, 0))
        if n and (total - b[0] or rows - b[2]):
            r["tables"][t] = {"bytes": (total - b[0]) / n, "index_bytes": (idx - b[1]) / n, "rows": (rows - b[2]) / n}
    r["pg_bytes"] = sum(v["bytes"] for v in r["tables"].values()) if r["tables"] else None
    for cls in ("keys", "payloads", "kept", "other"):
        r["pg_bytes_" + cls] = sum(v["bytes"] for t, v in r["tables"].items() if RETENTION_CLASS.get(t, "other") == cls)
    mem = base + ".worker-memory"
    if os.path.exists(mem):
        for line in open(mem):
            if line.startswith("VmHWM:"):
                r["worker_peak_rss_mb"] = int(line.split()[1]) / 1024
    if j.get("mailhook_memory"):
        r["http_peak_rss_mb"] = j["mailhook_memory"]["peak_rss_bytes"] / 2**20
    return r


def load(dirs):
    runs = []
    for d in dirs:
        for p in sorted(glob.glob(os.path.join(d, "run*-sizing.json"))):
            runs.append(run_inputs(p))
    if not runs:
        sys.exit(f"no run*-sizing.json in {' '.join(dirs)}: run scripts/sizing.sh first")
    return runs


SCALARS = [
    # key, label, format
    ("starts", "workflow starts", "{:.3f}"),
    ("workflow_tasks", "workflow tasks", "{:.3f}"),
    ("activity_tasks", "activity tasks", "{:.3f}"),
    ("actions", "Temporal actions (the server's `action` counter)", "{:.3f}"),
    ("history_bytes", "history bytes per run (sample)", "{:,.0f}"),
    ("history_writes", "history persistence writes", "{:.2f}"),
    ("history_write_ms", "  mean write latency (ms)", "{:.2f}"),
    ("notifications", "notifications", "{:.3f}"),
    ("pg_round_trips", "PostgreSQL round trips", "{:.2f}"),
    ("pg_rows_written", "PostgreSQL rows written", "{:.2f}"),
    ("pg_wal_bytes", "PostgreSQL WAL bytes", "{:,.0f}"),
    ("pg_bytes", "PostgreSQL bytes stored (tables + indexes + TOAST)", "{:,.0f}"),
    ("pg_bytes_keys", "  kept with the key (400 d)", "{:,.0f}"),
    ("pg_bytes_payloads", "  payloads and bodies (30-62 d)", "{:,.0f}"),
    ("pg_bytes_kept", "  not touched by retention", "{:,.0f}"),
    ("pg_bytes_other", "  other", "{:,.0f}"),
    ("cpu_ms_http", "CPU ms, HTTP process (serve --worker=false)", "{:.2f}"),
    ("cpu_ms_worker", "CPU ms, worker", "{:.2f}"),
    ("cpu_ms_temporal", "CPU ms, Temporal server (all services)", "{:.2f}"),
    ("cpu_ms_postgres", "CPU ms, PostgreSQL (mailhook's cluster)", "{:.2f}"),
]
# What the goal compares: counts, which do not depend on the machine's load.
COUNTS = ["starts", "workflow_tasks", "activity_tasks", "actions", "history_bytes", "pg_round_trips",
          "pg_rows_written", "pg_bytes"]


def med(runs, key):
    got = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(got) if got else None


def fmt(v, f):
    return "—" if v is None else f.format(v)


def payg(millions):
    cost, left = 0.0, millions
    for size, price in PAYG_TIERS:
        take = min(left, size)
        cost += take * price
        left -= take
        if left <= 0:
            return cost
    return cost + left * PAYG_BEYOND


def per_event_table(runs):
    print("## Per event (median of %d run%s)\n" % (len(runs), "" if len(runs) == 1 else "s"))
    print("| figure | per event | runs |")
    print("|---|---|---|")
    for key, label, f in SCALARS:
        print(f"| {label} | {fmt(med(runs, key), f)} | {', '.join(fmt(r.get(key), f) for r in runs)} |")
    print()
    for r in runs:
        print(f"- {r['run']}: tree {r['tree']}, {r['events']:,} events, verdict {'passed' if r['passed'] else 'FAILED'}, "
              f"load average {r['loadavg_start']} at the start and {r['loadavg_send_end']} when sending ended, "
              f"{fmt(r['processed_per_sec'], '{:.1f}')} events/s processed; worker schedule-to-start "
              f"{fmt(r.get('wft_schedule_to_start_ms'), '{:.1f}')} ms, run end to end "
              f"{fmt(r.get('workflow_e2e_ms'), '{:.0f}')} ms (means); peak RSS HTTP "
              f"{fmt(r.get('http_peak_rss_mb'), '{:.0f}')} MiB, worker {fmt(r.get('worker_peak_rss_mb'), '{:.0f}')} MiB")
    print()
    types = sorted({t for r in runs for t in r.get("actions_by_type", {})})
    if types:
        print("Actions per event by the server's action_type (median): " + ", ".join(
            f"{t} {statistics.median(r['actions_by_type'].get(t, 0.0) for r in runs):.4f}" for t in types) + "\n")
    tabs = {}
    for r in runs:
        for t, v in r["tables"].items():
            tabs.setdefault(t, []).append(v)
    print("| table | retention | rows per event | bytes per event | of which indexes |")
    print("|---|---|---|---|---|")
    for t in sorted(tabs, key=lambda t: -statistics.median(v["bytes"] for v in tabs[t])):
        vs = tabs[t]
        print(f"| {t} | {RETENTION_CLASS.get(t, 'other')} | {statistics.median(v['rows'] for v in vs):.3f} | "
              f"{statistics.median(v['bytes'] for v in vs):,.0f} | {statistics.median(v['index_bytes'] for v in vs):,.0f} |")
    print()


def scale_table(runs):
    x = {k: med(runs, k) for k, _, _ in SCALARS}
    ret_days = float(os.environ.get("NAMESPACE_RETENTION_DAYS", "7"))
    rows = []

    def row(label, f):
        rows.append((label, [f(n) for n in (1e6, 1e7, 1e8)]))

    g = lambda k: x.get(k) or 0.0
    row("events per second, mean over the day", lambda n: f"{n / DAY:,.1f}")
    row("Temporal actions a month", lambda n: f"{n * MONTH_DAYS * g('actions') / 1e6:,.0f} M")
    row("Temporal Cloud actions, Pay-As-You-Go (Business tiers, before the plan's included actions)", lambda n: f"${payg(n * MONTH_DAYS * g('actions') / 1e6):,.0f}/month")
    row("Temporal Cloud actions, Developer plan ($50/M)", lambda n: f"${n * MONTH_DAYS * g('actions') / 1e6 * 50:,.0f}/month")
    row(f"history retained ({ret_days:.0f}-day namespace retention)", lambda n: f"{n * ret_days * g('history_bytes') / 1e9:,.1f} GB")
    row("Temporal Cloud retained storage", lambda n: f"${n * ret_days * g('history_bytes') / 1e9 * GBH_PER_GB_MONTH * RETAINED_PER_GBH:,.0f}/month")
    e2e = (x.get("workflow_e2e_ms") or 1000) / 1000
    row("Temporal Cloud active storage (runs open)", lambda n: f"${n / DAY * e2e * g('history_bytes') / 1e9 * GBH_PER_GB_MONTH * ACTIVE_PER_GBH:,.2f}/month")
    row("Temporal history shards (min, for the mean rate)", lambda n: shards(n, x))
    row("workflow-task pollers in all (min, for the mean rate)", lambda n: f"{max(2, math.ceil(n / DAY * g('workflow_tasks') * POLL_RTT_S / 0.5))}")
    row("PostgreSQL stored per day", lambda n: f"{n * g('pg_bytes') / 1e9:,.2f} GB")
    row("PostgreSQL at steady state, default retention", lambda n: pg_steady(n, x))
    row("  + not touched by retention, a year", lambda n: f"{n * 365 * g('pg_bytes_kept') / 1e9:,.0f} GB")
    row("PostgreSQL WAL per day", lambda n: f"{n * g('pg_wal_bytes') / 1e9:,.1f} GB")
    row("PostgreSQL round trips per second", lambda n: f"{n / DAY * g('pg_round_trips'):,.0f}")
    for k, label in (("cpu_ms_http", "HTTP"), ("cpu_ms_worker", "worker"), ("cpu_ms_temporal", "Temporal server"), ("cpu_ms_postgres", "PostgreSQL")):
        row(f"CPU cores, {label} (mean)", lambda n, k=k: f"{n / DAY * g(k) / 1000:,.3g}")
    row("an hour's sink outage: extra actions", lambda n: f"{SINK_OUTAGE_ACTIONS_PER_HOUR + DRAIN_ACTIONS_PER_BATCH * n / 24 * g('notifications') / DRAIN_BATCH:,.0f}")
    row("an hour's PostgreSQL outage: extra actions", lambda n: f"{n / 24 * PG_OUTAGE_EXTRA_ACTIONS:,.0f} (${n / 24 * PG_OUTAGE_EXTRA_ACTIONS / 1e6 * 50:,.0f} at $50/M)")
    row("  and extra history", lambda n: f"{n / 24 * PG_OUTAGE_EXTRA_HISTORY / 1e9:,.2f} GB")
    print("## 1 M, 10 M and 100 M events a day\n")
    print("| | 1 M/day | 10 M/day | 100 M/day |")
    print("|---|---|---|---|")
    for label, vals in rows:
        print(f"| {label} | {' | '.join(vals)} |")
    print()
    print("Size CPU, pollers and shards for your peak rate, not the mean: multiply by peak/mean. "
          "Actions cost the plan's fee on top (Business: the greater of $500 or 10 % of usage).")


def shards(n, x):
    w, lat = x.get("history_writes"), x.get("history_write_ms")
    if not w or not lat:
        return "—"
    need = n / DAY * w * lat / 1000 / SHARD_UTILISATION
    return f"{need:,.1f} → {max(4, 2 ** math.ceil(math.log2(max(need, 1))))}"


def pg_steady(n, x):
    keys, pay = x.get("pg_bytes_keys") or 0, x.get("pg_bytes_payloads") or 0
    lo = n * (keys * KEY_DAYS + pay * PAYLOAD_DAYS_MIN) / 1e9
    hi = n * (keys * KEY_DAYS + pay * PAYLOAD_DAYS_MAX) / 1e9
    return f"{lo:,.0f}–{hi:,.0f} GB"


def compare(a_dir, b_dir):
    a, b = load([a_dir]), load([b_dir])
    print(f"| figure | model ({a_dir}) | fresh ({b_dir}) | difference |")
    print("|---|---|---|---|")
    worst = 0.0
    for key, label, f in SCALARS:
        va, vb = med(a, key), med(b, key)
        d = None if va in (None, 0) or vb is None else (vb - va) / va
        mark = ""
        if d is not None and key in COUNTS:
            worst = max(worst, abs(d))
            mark = " ✓" if abs(d) <= 0.10 else " ✗ (> 10 %)"
        print(f"| {label} | {fmt(va, f)} | {fmt(vb, f)} | {fmt(None if d is None else 100 * d, '{:+.1f} %')}{mark} |")
    print(f"\nLargest difference among the counts ({', '.join(COUNTS)}): {100 * worst:.1f} % (goal ≤ 10 %): "
          f"{'met' if worst <= 0.10 else 'NOT met'}. CPU figures depend on the machine's load; see each run's.")
    for r in a + b:
        print(f"- {r['run']} ({r['tree']}): load average {r['loadavg_start']} → {r['loadavg_send_end']}, {r['events']:,} events")
    return 0 if worst <= 0.10 else 1


def main(argv):
    if argv[:1] == ["--compare"]:
        return compare(argv[1], argv[2])
    out = None
    if argv[:1] == ["--json"]:
        out, argv = argv[1], argv[2:]
    runs = load(argv)
    if out:
        json.dump({"runs": runs, "median": {k: med(runs, k) for k, _, _ in SCALARS}}, open(out, "w"), indent=1)
    per_event_table(runs)
    scale_table(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
