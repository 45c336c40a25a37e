#!/usr/bin/env python3
"""The architecture as a check: every #include of the libraries' sources, resolved the way the
compiler resolves it, against the allowed dependencies of docs/architecture.md.

    engine  (engine/**, fault/**: twinrun_engine)      may include: itself
    twin    (sim/**: twinrun_twin)                      may include: itself, the engine's public headers
    cuda    (engine/cuda/**: twinrun_cuda)              may include: itself, the engine's public headers
    runner  (runner/**: twinrun_runner)                 may include: itself, the engine's and the twin's
                                                        public headers

The engine's public headers are engine/include/** and what engine/EXPORTS lists; the twin's are
sim/include/**; the runner's runner/include/**. Programs in <library>/cli belong to their library.
tests/ and fuzz/ are white-box and not checked.

Also checked: no "../" in an include (write "launch/tcp_store.h", the library's own root); no
include loop between folders (sim/sched -> sim/coll -> sim/sched); every header's guard is
TWINRUN_<path>_H, the path from the repository root with include/ and twinrun/ left out
(engine/ckpt/ckpt.h: TWINRUN_ENGINE_CKPT_CKPT_H; engine/include/twinrun/dev.h: TWINRUN_ENGINE_DEV_H).

Usage: check_boundaries.py [ROOT]    exit 0 when clean, 1 with one line per violation.
"""
import os
import re
import sys

SOURCES = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# headers the build writes into its own folder, not files of the tree: cmake/commit.cmake's commit and backend
GENERATED = {"twinrun_commit.h"}

# library -> the include roots of its sources (besides the including file's own folder), in order
ROOTS = {
    "engine": ["engine/include", "engine", "."],  # fault/ headers are "fault/fault.h"
    "twin": ["sim/include", "sim", "engine/include", "@exports"],
    "cuda": ["engine/cuda", "engine/include", "@exports"],
    "runner": ["runner/include", "runner", "engine/include", "@exports", "sim/include"],
}
ALLOWED = {
    "engine": {"engine", "engine-public"},
    "twin": {"twin", "twin-public", "engine-public"},
    "cuda": {"cuda", "engine-public"},
    "runner": {"runner", "runner-public", "engine-public", "twin-public"},
}


def library_of(path):
    if path.startswith("engine/cuda/"):
        return "cuda"
    if path.startswith("engine/") or path.startswith("fault/"):
        return "engine"
    if path.startswith("sim/"):
        return "twin"
    if path.startswith("runner/"):
        return "runner"
    return None


def target_of(path, exports):
    """What an included file is, as seen from another library."""
    lib = library_of(path)
    if lib == "engine" and (path.startswith("engine/include/") or path in exports):
        return "engine-public"
    if lib == "twin" and path.startswith("sim/include/"):
        return "twin-public"
    if lib == "runner" and path.startswith("runner/include/"):
        return "runner-public"
    return lib or "outside"


def guard_of(path):
    parts = [p for p in path.split("/") if p not in ("include", "twinrun")]
    return "TWINRUN_" + re.sub(r"[^A-Za-z0-9]", "_", "/".join(parts)).upper()


def read_exports(root):
    exports = {}
    with open(os.path.join(root, "engine/EXPORTS")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                exports[line] = line[len("engine/"):] if line.startswith("engine/") else line
    return exports


def resolve(root, src, name, lib, exports):
    here = os.path.dirname(src)
    candidates = [os.path.normpath(os.path.join(here, name))]
    for r in ROOTS[lib]:
        if r == "@exports":
            candidates += [p for p, rel in exports.items() if rel == name]
        else:
            candidates.append(os.path.normpath(os.path.join(r, name)))
    for c in candidates:
        if os.path.isfile(os.path.join(root, c)):
            return c
    return None


def find_cycles(edges):
    """Strongly connected components with more than one folder (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    exports = read_exports(root)
    errors = []
    for p in exports:
        if not os.path.isfile(os.path.join(root, p)):
            errors.append(f"engine/EXPORTS: {p} does not exist")
    folder_edges = {}
    for top in ("engine", "fault", "sim", "runner"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for fn in sorted(filenames):
                if not fn.endswith(SOURCES):
                    continue
                src = os.path.relpath(os.path.join(dirpath, fn), root)
                lib = library_of(src)
                with open(os.path.join(root, src), errors="replace") as f:
                    lines = f.readlines()
                if fn.endswith((".h", ".cuh")):
                    want = guard_of(src)
                    got = next((l.split()[1] for l in lines if l.startswith("#ifndef ") and len(l.split()) > 1), None)
                    if got != want:
                        errors.append(f"{src}: include guard {got or '(none)'}, expected {want}")
                for n, line in enumerate(lines, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    name = m.group(1)
                    if name in GENERATED:
                        continue
                    if ".." in name.split("/"):
                        errors.append(f'{src}:{n}: "#include "{name}"": no "../" in includes; name the header from '
                                      f"its library's include root")
                    dst = resolve(root, src, name, lib, exports)
                    if dst is None:
                        errors.append(f'{src}:{n}: "{name}" is not a header {lib} can see (not in its own folders '
                                      f"nor in a public header it may use)")
                        continue
                    what = target_of(dst, exports)
                    if what not in ALLOWED[lib]:
                        errors.append(f"{src}:{n}: {lib} includes {dst} ({what}): not allowed "
                                      f"({lib} may include {', '.join(sorted(ALLOWED[lib]))}; docs/architecture.md)")
                    a, b = os.path.dirname(src), os.path.dirname(dst)
                    if a != b:
                        folder_edges.setdefault(a, set()).add(b)
    for comp in find_cycles(folder_edges):
        errors.append("include loop between folders: " + " <-> ".join(comp))
    for e in errors:
        print(e)
    if errors:
        print(f"check_boundaries: {len(errors)} violation(s)")
        return 1
    print("check_boundaries: every include respects the architecture (docs/architecture.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
