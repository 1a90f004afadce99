#!/usr/bin/env python3
"""Where PostgreSQL's work per event goes, from a loadtest-bench.sh results directory.

    scripts/pg_attribution.py $WORK/results [--top 25]

For every fixed phase (run*-fixed*.json) it prints, per accepted event (per completed workflow for
a baseline phase, run*-baseline*.json: Temporal's share alone):
  - PostgreSQL's CPU by database (*.pgcpu-before/after.tsv: each backend's utime + stime, so
    mailhook's database, Temporal's and its visibility's apart; background processes together);
  - mailhook's rows written by table (*.tables-before/after.tsv: inserted, updated and of those
    HOT, deleted, and the index entries they imply: an insert or a non-HOT update writes one
    into each index whose predicate the row meets, counted here as every index, an upper bound);
  - with PGSTATS=1 (and TEMPORAL_PG=private for Temporal's databases), the statements by
    database and table (*.statements.tsv, pg_stat_statements): calls, rows, time (execution and planning; planning and the plans made also apart), WAL bytes, blocks read (the load
    generator's own statements in mailhook's database, as role postgres, left out).
Nothing is written; the figures go to stdout as Markdown tables.
"""
import collections
import glob
import json
import os
import re
import sys

TICK = os.sysconf("SC_CLK_TCK")


def tsv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def events_of(prefix):
    with open(prefix + ".json") as f:
        j = json.load(f)
    for k in ("events_accepted", "completed"):
        if isinstance(j.get(k), (int, float)) and j[k] > 0:
            return j[k], j
    raise SystemExit(f"{prefix}.json: no accepted event (or completed workflow) count")


def dbclass(name, mailhook_db):
    if name == mailhook_db:
        return "mailhook"
    if name.startswith("temporal_visibility_"):
        return "temporal visibility"
    if name.startswith("temporal_"):
        return "temporal"
    if name.startswith("("):
        return "background"
    return "other databases"


def cpu_by_db(prefix, mailhook_db, n):
    before = {(r[0], r[1]): (r[2], int(r[3] or 0)) for r in tsv(prefix + ".pgcpu-before.tsv") if len(r) == 4}
    # A cluster listed twice (runs before the bench listed it once) counts once.
    after = list({(r[0], r[1]): r for r in tsv(prefix + ".pgcpu-after.tsv") if len(r) == 4}.values())
    if not after:
        return None
    out = collections.Counter()
    for port, pid, db, ticks in (r for r in after if len(r) == 4):
        prev = before.get((port, pid))
        used = int(ticks or 0) - (prev[1] if prev and prev[0] == db else 0)
        cls = dbclass(db, mailhook_db)
        if cls == "other databases" and port != after[0][0]:
            cls = "other databases (bench cluster)"
        out[cls] += max(used, 0)
    return {k: v / TICK * 1000 / n for k, v in out.items()}


def tables(prefix, n):
    b = {r[0]: [int(x) for x in r[1:]] for r in tsv(prefix + ".tables-before.tsv")}
    rows = []
    for r in tsv(prefix + ".tables-after.tsv"):
        a = [int(x) for x in r[1:]]
        p = b.get(r[0], [0] * 5)
        ins, upd, hot, dele = (a[i] - p[i] for i in range(4))
        if ins + upd + dele == 0:
            continue
        rows.append((r[0], ins / n, upd / n, hot / n, dele / n, a[4], (ins + upd - hot) * a[4] / n))
    return sorted(rows, key=lambda x: -(x[1] + x[2] + x[4]))


VERB = re.compile(r"\b(insert\s+into|update|delete\s+from|from)\s+([a-z_][a-z0-9_.]*)", re.I)


def statement_key(q):
    ql = q.strip().lower()
    if ql in ("begin", "commit", "rollback") or ql.startswith(("begin ", "start transaction", "set ")):
        return "BEGIN/COMMIT/SET"
    verbs = []
    for m in VERB.finditer(q):
        v = m.group(1).split()[0].upper()
        v = "SELECT" if v == "FROM" else v
        verbs.append(f"{v} {m.group(2)}")
    # The first write names the statement; a read-only one by its first table.
    for v in verbs:
        if not v.startswith("SELECT"):
            return v
    return verbs[0] if verbs else q[:40]


def statements(prefix, mailhook_db, n, top):
    # calls, rows, time ms (execution + planning), WAL bytes, blocks, planning ms, plans made
    agg = collections.defaultdict(lambda: [0, 0, 0.0, 0, 0, 0.0, 0])
    for r in tsv(prefix + ".statements.tsv"):
        if len(r) == 7:  # the first layout: no role, planning or blocks
            r = [r[0], "", *r[1:4], "0", *r[4:6], "0", r[6]]
        if len(r) < 10:
            continue
        db, role, calls, rws, ms, plan_ms, wal, _dirtied, blocks, q = r[:10]
        plans = int(r[10]) if len(r) > 10 and r[10] else 0  # runs before it was recorded: 0
        if role == "postgres" and db == mailhook_db:
            continue  # the load generator's progress polls and verdict, not mailhook's work
        ms = float(ms) + float(plan_ms)
        cls = dbclass(db, mailhook_db)
        if cls in ("other databases", "background"):
            continue
        a = agg[(cls, statement_key(q))]
        a[0] += int(calls)
        a[1] += int(rws)
        a[2] += float(ms)
        a[3] += int(float(wal))
        a[4] += int(blocks)
        a[5] += float(plan_ms)
        a[6] += plans
    if not agg:
        return None, None
    per_db = collections.defaultdict(lambda: [0, 0, 0.0, 0, 0, 0.0, 0])
    for (cls, _), a in agg.items():
        for i in range(7):
            per_db[cls][i] += a[i]
    items = sorted(agg.items(), key=lambda kv: -kv[1][2])[:top]
    return per_db, items


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    res = sys.argv[1]
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 25
    mailhook_db = os.environ.get("DB", "")
    for js in sorted(glob.glob(os.path.join(res, "run*-fixed*.json")) + glob.glob(os.path.join(res, "run*-baseline*.json"))):
        prefix = js[: -len(".json")]
        n, _ = events_of(prefix)
        name = os.path.basename(prefix)
        print(f"\n### {name}: {n:,} {'completed workflows' if '-baseline' in name else 'accepted events'}\n")
        db = mailhook_db
        if not db:  # the database whose tables were counted: the one that is not Temporal's
            names = {r[1] for r in tsv(prefix + ".pgdb-after.tsv") if len(r) > 1}
            cands = [x for x in names if not x.startswith("temporal") and x != "postgres"]
            db = next((x for x in cands if "bench" in x), cands[0] if cands else "")
        cpu = cpu_by_db(prefix, db, n)
        if cpu:
            print("PostgreSQL CPU per event (ms): " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])))
        t = tables(prefix, n)
        if t:
            print("\n| mailhook table | inserted | updated (HOT) | deleted | indexes | index entries ≤ |")
            print("|---|---|---|---|---|---|")
            tot = [0.0] * 4
            for name_, ins, upd, hot, dele, idx, ent in t:
                print(f"| {name_} | {ins:.2f} | {upd:.2f} ({hot:.2f}) | {dele:.2f} | {idx} | {ent:.1f} |")
                tot[0] += ins + upd + dele
                tot[1] += upd - hot
                tot[2] += ent
            print(f"| **all** | rows written {tot[0]:.2f} | non-HOT updates {tot[1]:.2f} | | | {tot[2]:.1f} |")
        per_db, items = statements(prefix, db, n, top)
        if per_db:
            print("\n| database | calls | rows | time ms | of it planning ms | plans | WAL bytes | blocks |")
            print("|---|---|---|---|---|---|---|---|")
            for cls, a in sorted(per_db.items()):
                print(f"| {cls} | {a[0] / n:.2f} | {a[1] / n:.2f} | {a[2] / n:.3f} | {a[5] / n:.3f} | {a[6] / n:.3f} | {a[3] / n:,.0f} | {a[4] / n:.0f} |")
            print(f"\nTop {top} statements by time, per event (plans: per call):\n")
            print("| database | statement | calls | rows | time ms | of it planning ms | plans per call | WAL bytes | blocks |")
            print("|---|---|---|---|---|---|---|---|---|")
            for (cls, k), a in items:
                ppc = a[6] / a[0] if a[0] else 0
                print(f"| {cls} | {k} | {a[0] / n:.2f} | {a[1] / n:.2f} | {a[2] / n:.3f} | {a[5] / n:.3f} | {ppc:.3f} | {a[3] / n:,.0f} | {a[4] / n:.0f} |")


if __name__ == "__main__":
    main()
