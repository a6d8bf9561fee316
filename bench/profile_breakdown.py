#!/usr/bin/env python3
"""Where a training step's device time goes, from a gpp profile.

    bench/profile_breakdown.py PROFILE.json [MICRO_BATCH] [--top N]

Reads a profile written by `gpp-train --profile-out` (docs/planner.md
"Profiles": per op, forward and forward+backward milliseconds at each timed
micro-batch size) and prints, at MICRO_BATCH (default: the largest size
timed), the forward and backward time per kind of op (the last part of the
op's name without its digits: b0.l3.fc1 -> fc, b1.l0.attn -> attn) with
its share of the step, then the N (default 8) slowest ops. The optimizer
step is not in a profile (the planner costs it from the device preset).

Standard library only: it runs on any machine that ran the profile
(bench_sim_gpu.sh calls it for every profile it takes). Exit status 2 on a
file that is not a profile, naming what is wrong.
"""
import json
import re
import sys


def kind(name):
    last = name.rsplit(".", 1)[-1]
    return re.sub(r"\d+$", "", last) or last


def main(argv):
    args = [a for a in argv[1:]]
    top = 8
    if "--top" in args:
        i = args.index("--top")
        try:
            top = int(args[i + 1])
        except (IndexError, ValueError):
            print("profile_breakdown: --top needs a number", file=sys.stderr)
            return 2
        del args[i : i + 2]
    if not 1 <= len(args) <= 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    path = args[0]
    try:
        with open(path) as f:
            prof = json.load(f)
    except (OSError, ValueError) as e:
        print(f"profile_breakdown: {path}: {e}", file=sys.stderr)
        return 2
    ops = {k: v for k, v in prof.items() if k != "_gpp"} if isinstance(prof, dict) else {}
    if not ops or not all(isinstance(v, dict) and "runtime" in v and "forward" in v for v in ops.values()):
        print(f"profile_breakdown: {path}: not a gpp profile (each op needs 'runtime' and "
              "'forward'; write one with gpp-train --profile-out)", file=sys.stderr)
        return 2
    sizes = sorted({int(s) for v in ops.values() for s in v["runtime"]})
    mb = int(args[1]) if len(args) == 2 else sizes[-1]
    if mb not in sizes:
        print(f"profile_breakdown: {path}: micro-batch {mb} was not timed (timed: "
              f"{', '.join(map(str, sizes))})", file=sys.stderr)
        return 2
    rows = []
    for k in sorted(ops, key=int):
        v = ops[k]
        fwd = float(v["forward"].get(str(mb), 0.0))
        tot = float(v["runtime"].get(str(mb), fwd))
        rows.append((v.get("name", k), fwd, max(tot - fwd, 0.0)))
    total = sum(f + b for _, f, b in rows)
    meta = prof.get("_gpp", {})
    print(f"# {meta.get('model', '?')} on {meta.get('device', '?')} "
          f"({meta.get('backend', '?')}, {meta.get('precision', '?')}), micro-batch {mb}: "
          f"{total:.3f} ms forward + backward over {len(rows)} ops")
    by = {}
    for name, f, b in rows:
        e = by.setdefault(kind(name), [0, 0.0, 0.0])
        e[0] += 1
        e[1] += f
        e[2] += b
    print("| op kind | ops | forward ms | backward ms | share |")
    print("|---|---|---|---|---|")
    for kd, (n, f, b) in sorted(by.items(), key=lambda x: -(x[1][1] + x[1][2])):
        share = (f + b) / total * 100 if total > 0 else 0.0
        print(f"| {kd} | {n} | {f:.3f} | {b:.3f} | {share:.1f} % |")
    print()
    print(f"| slowest op | forward ms | backward ms |")
    print("|---|---|---|")
    for name, f, b in sorted(rows, key=lambda r: -(r[1] + r[2]))[:top]:
        print(f"| {name} | {f:.3f} | {b:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
