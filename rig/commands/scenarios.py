"""`rig scenarios`: the lifecycle scenarios the rig reproduces, what each does, the upstream
report it stands for and the verdicts it is known to give (``rig.scenarios``)."""

from __future__ import annotations

from rig.errors import Exit


def add_parser(sub) -> None:
    p = sub.add_parser("scenarios", help="the lifecycle scenarios (--scenario NAME): what each does, its "
                       "upstream report, its expected verdicts",
                       description="List the lifecycle scenarios `rig cycle` and `rig soak` run with "
                       "--scenario NAME (--control: its negative control, the same without the fault).")
    p.add_argument("--markdown", action="store_true", help="a Markdown table (for docs and reports)")
    p.set_defaults(func=run)


def rows() -> list[dict]:
    from rig.scenarios import SCENARIOS

    out = []
    for s in SCENARIOS.values():
        expected = " / ".join(s.expected)
        others = [f"{'' if v == '*' else v + ' '}{'' if e == '*' else e + ' '}{' / '.join(x)}" for v, e, x in s.known]
        if others:
            expected += f" ({'; '.join(others)})"
        if s.growth != "ok":
            expected += f"; growth {s.growth}"
        built = ", ".join(x for x in (f"models/scenarios/{s.repository}" if s.repository else "",
                                      f"--fault {s.fault}" if s.fault != "none" and not s.repository else "",
                                      f"--retain {s.retain}" if s.retain != "none" else "",
                                      f"client {s.client}" if s.client != "none" else "",
                                      f"--restart {s.restart}" if s.restart else "") if x)
        out.append({"scenario": s.name, "what": s.what, "upstream": ", ".join(s.upstream) or "the rig's own control",
                    "expected": expected + (" under a --workload" if s.workload else ""),
                    "measured on": f"{', '.join(s.measured)}; {', '.join(s.engines)}",
                    "control": " / ".join(s.control) if s.has_control else "none (it measures)",
                    "built from": built})
    return out


def run(args) -> int:
    table = rows()
    keys = list(table[0])
    if args.markdown:
        print("| " + " | ".join(keys) + " |")
        print("| " + " | ".join("---" for _ in keys) + " |")
        for r in table:
            print("| " + " | ".join(r[k].replace("|", "/") for k in keys) + " |")
        return Exit.OK
    for r in table:
        print(f"{r['scenario']}  ({r['upstream']}; {r['built from']})")
        print(f"    {r['what']}")
        print(f"    expected: {r['expected']}; control: {r['control']}")
    print("\nrun one: rig soak --scenario NAME [--control] --cycles 3 --exit-timeout 3")
    return Exit.OK
