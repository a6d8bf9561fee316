#!/usr/bin/env python3
"""zb_trace: where the W passes ran, from gpp-coordinator --trace files of
the same plan under 1f1b and zb-h1 (bench/zb_runtime.sh).

Per stage (replica 0's measured row): compute time (F, B, W, all-reduce,
step), idle time (the iteration's span less compute: waits for receives),
and for zb-h1 the W passes that ran before the stage's last B (between two
B passes, where a 1F1B stage waits for the next gradient) and after it
(the drain); then a text Gantt row per stage for both traces, one column
per 1/COLS of the longer iteration (F forward, B backward or its input
part, W parameter part, A all-reduce, S step, . idle).

Usage: zb_trace.py 1F1B_TRACE ZB_TRACE ZB_PLAN [COLS]"""
import json
import sys

COMPUTE = ("F", "B", "W")


def rows(path):
    t = json.load(open(path))
    ev = t["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev
             if e["ph"] == "M" and e["name"] == "process_name"}
    meas = {p for p, n in names.items() if n.startswith("measured stage ")}
    out = {}
    for e in ev:
        if e["ph"] == "X" and e["pid"] in meas and e["tid"] == 0:
            out.setdefault(e["pid"], []).append(e)
    for s in out:
        out[s].sort(key=lambda e: e["ts"])
    return out


def kind(name):
    if name[0] in COMPUTE and name[1:].isdigit():
        return name[0]
    return {"ALLREDUCE": "A", "STEP": "S"}.get(name)


def summary(r, end_us):
    busy = sum(e["dur"] for e in r if kind(e["name"]))
    w = [e for e in r if kind(e["name"]) == "W"]
    last_b = max((e["ts"] for e in r if kind(e["name"]) == "B"), default=0)
    return busy, end_us - busy, w, sum(1 for e in w if e["ts"] < last_b)


def gantt(r, span_us, cols):
    row = ["."] * cols
    for e in r:
        k = kind(e["name"])
        if not k:
            continue
        c0 = int(e["ts"] / span_us * cols)
        c1 = max(c0 + 1, int((e["ts"] + e["dur"]) / span_us * cols))
        for c in range(c0, min(c1, cols)):
            row[c] = k
    return "".join(row)


def main():
    a, z = rows(sys.argv[1]), rows(sys.argv[2])
    plan = json.load(open(sys.argv[3]))
    cols = int(sys.argv[4]) if len(sys.argv) > 4 else 100
    end = {n: max(e["ts"] + e["dur"] for r in t.values() for e in r)
           for n, t in (("1f1b", a), ("zb-h1", z))}
    print("traced iteration: 1f1b %.3f ms, zb-h1 %.3f ms" % (end["1f1b"] / 1e3, end["zb-h1"] / 1e3))
    print("%-5s %-9s %10s %10s %10s  %s" % ("stage", "schedule", "compute ms", "idle ms", "W ms",
                                            "W passes before the last B / all"))
    for s in sorted(z):
        for n, t in (("1f1b", a), ("zb-h1", z)):
            busy, idle, w, early = summary(t[s], end[n])
            print("%-5d %-9s %10.3f %10.3f %10.3f  %s" %
                  (s, n, busy / 1e3, idle / 1e3, sum(e["dur"] for e in w) / 1e3,
                   "%d / %d (W delay %s)" % (early, len(w), plan["stages"][s].get("w_delay"))
                   if n == "zb-h1" else "-"))
    span = max(end.values())
    print("Gantt, %.3f ms across (F forward, B backward / input part, W parameter part, "
          "A all-reduce, S step, . idle)" % (span / 1e3))
    for s in sorted(z):
        print("stage %d 1f1b  |%s|" % (s, gantt(a[s], span, cols)))
        print("stage %d zb-h1 |%s|" % (s, gantt(z[s], span, cols)))


if __name__ == "__main__":
    main()
