#!/usr/bin/env python3
"""Adds up the campaign slices of lab/campaign_1024.sh from their JSON reports' "campaign" objects:
per fault kind, the trials and those that were ok (fired, detected, blamed on the right rank or node,
and recovered with the fault-free run's losses and weights bit for bit), then the totals of each;
where the reports list their trials (campaign.per_trial), data_corrupt's trials per form of damage too.

Usage: campaign_summary.py SLICE_JSON... ; exits 1 unless every trial of every slice was ok."""
import json
import sys
from collections import defaultdict

FIELDS = ("trials", "fired", "detected", "attributed", "continuity_ok", "recovered")


def main():
    per_kind = defaultdict(lambda: [0, 0])
    per_damage = defaultdict(lambda: [0, 0])
    total = dict.fromkeys(FIELDS, 0)
    slices = 0
    for path in sys.argv[1:]:
        with open(path) as f:
            c = json.load(f).get("campaign")
        if not c:
            print(f"campaign_summary: {path} holds no campaign")
            return 1
        slices += 1
        for k in FIELDS:
            total[k] += int(c[k])
        for name, e in c["per_kind"].items():
            per_kind[name][0] += int(e["trials"])
            per_kind[name][1] += int(e["ok"])
        for t in c.get("per_trial") or []:
            if t["kind"] == "data_corrupt":
                per_damage[t["damage"]][0] += 1
                per_damage[t["damage"]][1] += bool(t["ok"])
    print(f"{'kind':<16} {'trials':>7} {'ok':>7}")
    for name in sorted(per_kind):
        t, ok = per_kind[name]
        if t:
            print(f"{name:<16} {t:>7} {ok:>7}")
        if name == "data_corrupt":  # its forms of damage, indented under it
            for form in sorted(per_damage):
                print(f"{'  ' + form:<16} {per_damage[form][0]:>7} {per_damage[form][1]:>7}")
    print(f"{slices} slices: " + ", ".join(f"{k} {total[k]}" for k in FIELDS))
    ok_all = sum(v[1] for v in per_kind.values())
    return 0 if total["trials"] > 0 and ok_all == total["trials"] else 1


if __name__ == "__main__":
    sys.exit(main())
