#!/usr/bin/env python3
"""The architecture as a check: every #include of the libraries' sources, resolved the way the
compiler resolves it, against the layers of docs/architecture.md:

    base    (base/**: twinrun_base)       may include: itself
    twin    (sim/**: twinrun_twin)        may include: itself, base's public headers
    cuda    (cuda/**: twinrun_cuda)       may include: itself, base's public headers
    fault   (fault/**: twinrun_fault)     may include: itself, base's public headers
    engine  (engine/**: twinrun_engine)   may include: itself, base's and fault's public headers
    runner  (runner/**: twinrun_runner)   may include: itself, base's, fault's, the engine's and the
                                          twin's public headers

A library's public headers, for one consumer, are its include/ folder (base/include, engine/include,
sim/include, runner/include) and the internal headers its EXPORTS file names for that consumer
(base/EXPORTS, fault/EXPORTS, engine/EXPORTS: "NAME CONSUMER..."): what CMake links into
build/<preset>/exports/<consumer>/. Programs in <library>/cli belong to their library. tests/ and fuzz/
are white-box and not checked.

Also checked: no "../" in an include (write "launch/tcp_store.h", the library's own root); no
include loop between folders (sim/sched -> sim/coll -> sim/sched); every header's guard is
TWINRUN_<path>_H, the path from the repository root with include/ and twinrun/ left out
(engine/ckpt/ckpt.h: TWINRUN_ENGINE_CKPT_CKPT_H; base/include/twinrun/dev.h: TWINRUN_BASE_DEV_H).

Names: a function a library's .c file defines outside `static` has a prefix that names its folder (the
first word, or the first two when the first is the project's "tr"): NAMES below maps every prefix to the
one folder it names, and a function lives in that folder or below it. The seam's prefixes (dev_, kern_,
coll_, launch_) name the seam instead: such a function is declared in base/include/twinrun/<prefix>.h
(or the kernel contract, kern_check.h) and defined by base's shared part or a backend, unless it lives in
a folder of that name (sim/coll's coll_post names sim/coll). `main` is a
program's.

Usage: check_boundaries.py [ROOT]    exit 0 when clean, 1 with one line per violation.
"""
import os
import re
import sys

SOURCES = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# headers the build writes into its own folder, not files of the tree: cmake/commit.cmake's commit and backend
GENERATED = {"twinrun_commit.h"}

# library -> (its folder, the folder its EXPORTS names are relative to, its public include folder)
LIBRARIES = {
    "base": ("base", "base", "base/include"),
    "twin": ("sim", None, "sim/include"),
    "cuda": ("cuda", None, None),
    "fault": ("fault", ".", None),
    "engine": ("engine", "engine", "engine/include"),
    "runner": ("runner", None, "runner/include"),
}
# library -> the libraries whose public headers it may include (besides its own files)
USES = {
    "base": [],
    "twin": ["base"],
    "cuda": ["base"],
    "fault": ["base"],
    "engine": ["base", "fault"],
    "runner": ["base", "fault", "engine", "twin"],
}
# library -> its include roots besides the including file's folder, in the compiler's order
# ("@exports": build/<preset>/exports/<library>)
ROOTS = {
    "base": ["base/include", "base"],
    "twin": ["sim/include", "sim", "base/include", "@exports"],
    "cuda": ["cuda", "base/include", "@exports"],
    "fault": ["base/include", "@exports"],
    "engine": ["engine/include", "engine", "base/include", "@exports"],
    "runner": ["runner/include", "runner", "engine/include", "base/include", "sim/include", "@exports"],
}


# prefix -> the folder it names (docs/architecture.md#names)
NAMES = {
    # base
    "tr_errf": "base/core", "tr_errlist": "base/core", "tr_fatal": "base/core", "tr_safe": "base/core",
    "tr_version": "base/core", "tr_edit": "base/core", "tr_looks": "base/core", "tr_xml": "base/core",
    "tr_majority": "base/core", "tr_background": "base/core",
    "flight": "base/flight",
    "tr_launch": "base/launch", "tr_launcher": "base/launch", "tr_store": "base/launch",
    "tr_heartbeat": "base/launch", "tr_sha256": "base/launch", "tr_hmac": "base/launch",
    "tr_nvml": "base/nvml",
    # the backends
    "twin": "sim", "rank": "sim/sched", "mp": "sim/multiproc", "shape": "sim/predict", "trace": "sim/trace",
    "tr_cu": "cuda",
    # fault
    "fault": "fault",
    # the engine
    "ckpt": "engine/ckpt",
    "tr_config": "engine/config", "tr_flag": "engine/config", "tr_flags": "engine/config",
    "tr_megatron": "engine/config",
    "tr_data": "engine/data", "tr_idx": "engine/data", "tr_gpt": "engine/data", "tr_blend": "engine/data",
    "tr_blended": "engine/data", "tr_mock": "engine/data", "tr_sampler": "engine/data",
    "tr_split": "engine/data", "tr_pre": "engine/data", "tr_pyjson": "engine/data", "tr_jsonl": "engine/data",
    "tr_npy": "engine/data", "tr_mt": "engine/data", "tr_pcg64": "engine/data", "tr_md5": "engine/data",
    "st": "engine/io", "hf": "engine/io", "tr_tb": "engine/io", "tr_crc32c": "engine/io",
    "llama": "engine/model",
    "optim": "engine/optim", "tr_lr": "engine/optim",
    "tr_grid": "engine/parallel", "tr_groups": "engine/parallel",
    "tr_tok": "engine/tok",
    "train": "engine/train",
    "doctor": "engine/doctor",
    # the runner: the loader, the supervisor, the planner, the reports, the work folder
    "scenario": "runner", "runner": "runner", "plan": "runner", "report": "runner", "work": "runner",
}
SEAM = {"dev": ("dev.h",), "kern": ("kern.h", "kern_check.h"), "coll": ("coll.h",), "launch": ("launch.h",)}
# a definition at the start of a line: qualifiers and type, the name, its parameters, the opening brace
DEFINITION = re.compile(r"^(?!static\b|typedef\b|extern\b|#|return\b|if\b|else\b)([A-Za-z_][\w \t*]*?[\s*])"
                        r"([a-z_][a-zA-Z0-9_]*)\s*\(([^;{}()]|\([^()]*\))*\)\s*\{", re.M)


def prefix_of(name):
    words = name.split("_")
    return "_".join(words[:2]) if words[0] == "tr" and len(words) > 1 else words[0]


def check_names(root, src, text, seam_text):
    """The functions `src` defines outside `static`, each against NAMES and the seam."""
    errors = []
    # a macro that expands to `static ...` (kern_gemm.c's GEMM_AVX2_SPECIALISED) makes its functions static
    static_macros = set(re.findall(r"^#\s*define\s+(\w+)\s+.*\bstatic\b", text, re.M))
    here = os.path.dirname(src)
    for m in DEFINITION.finditer(text):
        quals, name = m.group(1).split(), m.group(2)
        if name == "main" or any(q in static_macros or q == "static" for q in quals):
            continue
        line = text.count("\n", 0, m.start(2)) + 1
        p = prefix_of(name)
        if p in SEAM:
            if os.path.basename(here) != p and not any(re.search(r"\b" + name + r"\s*\(", seam_text[h]) or
                       re.search(r"X\(" + name[:-len("_check")] + r",", seam_text[h]) for h in SEAM[p]):
                errors.append(f"{src}:{line}: {name}: the prefix {p}_ is the seam's, but base/include/twinrun/"
                              f"{SEAM[p][0]} does not declare {name}; name it after its folder ({here})")
            continue
        folder = NAMES.get(p)
        if folder is None:
            errors.append(f"{src}:{line}: {name}: the prefix {p}_ names no folder; name it after its folder "
                          f"({here}: NAMES in ci/check_boundaries.py lists each folder's prefixes) or make it static")
        elif here != folder and not here.startswith(folder + "/"):
            errors.append(f"{src}:{line}: {name}: the prefix {p}_ names {folder}, not {here}; move it there or "
                          f"rename it after its folder")
    return errors


def library_of(path):
    for lib, (folder, _, _) in LIBRARIES.items():
        if path.startswith(folder + "/"):
            return lib
    return None


def read_exports(root):
    """{consumer: {name as included: path from the root}} from every library's EXPORTS file, and errors."""
    exports, errors = {lib: {} for lib in LIBRARIES}, []
    for lib, (folder, base, _) in LIBRARIES.items():
        path = os.path.join(root, folder, "EXPORTS")
        if base is None:
            continue
        if not os.path.isfile(path):
            errors.append(f"{folder}/EXPORTS: missing")
            continue
        with open(path) as f:
            for n, line in enumerate(f, 1):
                words = line.split()
                if not words or words[0].startswith("#"):
                    continue
                name, consumers = words[0], words[1:]
                target = os.path.normpath(os.path.join(base, name))
                if not os.path.isfile(os.path.join(root, target)):
                    errors.append(f"{folder}/EXPORTS:{n}: {target} does not exist")
                if library_of(target) != lib:
                    errors.append(f"{folder}/EXPORTS:{n}: {target} is not a header of {lib}")
                for c in consumers:
                    if c not in LIBRARIES or c == lib:
                        errors.append(f"{folder}/EXPORTS:{n}: '{c}' is not another library "
                                      f"({', '.join(l for l in LIBRARIES if l != lib)})")
                    elif lib not in USES[c]:
                        errors.append(f"{folder}/EXPORTS:{n}: exports {name} to {c}, which may not use {lib} "
                                      f"(docs/architecture.md)")
                    else:
                        exports[c][name] = target
    return exports, errors


def public_for(consumer, path, exports):
    """Whether `path` (a file of another library) is one of the public headers `consumer` may see."""
    lib = library_of(path)
    inc = LIBRARIES[lib][2] if lib else None
    return bool(inc and path.startswith(inc + "/")) or path in exports[consumer].values()


def guard_of(path):
    parts = [p for p in path.split("/") if p not in ("include", "twinrun")]
    return "TWINRUN_" + re.sub(r"[^A-Za-z0-9]", "_", "/".join(parts)).upper()


def resolve(root, src, name, lib, exports):
    here = os.path.dirname(src)
    candidates = [os.path.normpath(os.path.join(here, name))]
    for r in ROOTS[lib]:
        if r == "@exports":
            if name in exports[lib]:
                candidates.append(exports[lib][name])
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
    exports, errors = read_exports(root)
    seam_text = {}
    for hs in SEAM.values():
        for h in hs:
            with open(os.path.join(root, "base/include/twinrun", h)) as f:
                seam_text[h] = f.read()
    folder_edges = {}
    for lib, (top, _, _) in LIBRARIES.items():
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for fn in sorted(filenames):
                if not fn.endswith(SOURCES):
                    continue
                src = os.path.relpath(os.path.join(dirpath, fn), root)
                with open(os.path.join(root, src), errors="replace") as f:
                    text = f.read()
                lines = text.splitlines(keepends=True)
                if fn.endswith(".c"):
                    errors += check_names(root, src, text, seam_text)
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
                    other = library_of(dst)
                    if other != lib:
                        if other not in USES[lib]:
                            errors.append(f"{src}:{n}: {lib} includes {dst} ({other or 'outside the libraries'}): not "
                                          f"allowed ({lib} may use {', '.join(USES[lib]) or 'nothing else'}; "
                                          f"docs/architecture.md)")
                        elif not public_for(lib, dst, exports):
                            errors.append(f"{src}:{n}: {lib} includes {dst}, which {other} does not export to {lib} "
                                          f"(its include folder or {LIBRARIES[other][0]}/EXPORTS)")
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
    print("check_boundaries: every include respects the layers and every function's prefix names its folder "
          "(docs/architecture.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
