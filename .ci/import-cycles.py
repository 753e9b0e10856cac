#!/usr/bin/env python3
"""Fails when the modules of a crate import each other in a cycle, naming the cycle and where each arrow is written.

A layer is a folder's children (and the top-level modules of a crate root): an arrow `a -> b` among them means some
code in `a` (any file below it) names a path into `b` through `crate::`, `super::` or `self::` (a `use` or a path
in the code). Arrows are counted at the level where the two paths part: `http::api::named` naming
`crate::runs::log` is `http -> runs` among the top-level modules, and `super::run_stream` from `http::api::named`
is `named -> run_stream` among `http::api`'s children. A path is followed through the `use` items of the modules it
passes (a parent's `pub use x::Name` names `x`), so a re-export does not hide an arrow. An arrow from a module to
its own parent or child is no layering question and is not counted.

Not counted: comments and doc links (no dependency of the code), `#[cfg(test)]` modules and `use` items (a test
may reach across the layers it checks), and paths into other crates (Cargo already refuses a cycle among crates).
The module tree is read from the `mod` items of each crate root (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`).

A cycle listed in `.ci/import-cycles.known` (one a line: the crate root, the layer, the knot's modules) is
reported but does not fail: a cycle whose files another series is rewriting waits for it there. A cycle not listed
fails, and so does a listed one that is gone (delete its line): the list only shrinks.

    .ci/import-cycles.py [--arrows] [REPO]   exit 0: no cycle but the known ones; 1: otherwise, each printed with
                                            its arrows (--arrows also prints every layer's arrows)
    .ci/import-cycles.py --self-test        the check against a made-up workspace whose cycles are known
"""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rust_source import CFG_TEST, attributes_before, clean, crate_roots, made_up_workspace, matching_brace, members  # noqa: E402


PATH_ATTR = re.compile(r'#\[\s*path\s*=\s*"([^"]*)"\s*\]')


def parse_use_tree(tree):
    """`a::{b, c::d as e, self}` -> [(['a','b'], 'b'), (['a','c','d'], 'e'), (['a'], 'a')]; a glob gives no name."""
    tokens = re.findall(r"::|[{},*]|\w+", tree)
    pos = 0

    def parse(prefix):
        nonlocal pos
        out = []
        path = list(prefix)
        while pos < len(tokens):
            tok = tokens[pos]
            if tok == "::":
                pos += 1
            elif tok == "{":
                pos += 1
                while pos < len(tokens) and tokens[pos] != "}":
                    out.extend(parse(path))
                    if pos < len(tokens) and tokens[pos] == ",":
                        pos += 1
                pos += 1
                return out
            elif tok in (",", "}"):
                break
            elif tok == "*":
                pos += 1
                out.append((path, None))
                return out
            elif tok == "as":
                pos += 1
                alias = tokens[pos] if pos < len(tokens) else None
                pos += 1
                out.append((path, alias))
                return out
            elif tok == "self" and prefix and len(path) == len(prefix):
                # `a::{self, …}` (or `self as b`): the module `a` itself, named `a` (or `b`).
                pos += 1
                name = prefix[-1]
                if pos + 1 < len(tokens) and tokens[pos] == "as":
                    name, pos = tokens[pos + 1], pos + 2
                out.append((list(prefix), name))
                return out
            else:
                path.append(tok)
                pos += 1
        if len(path) > len(prefix):
            out.append((path, path[-1]))
        return out

    return parse([])


class Module:
    def __init__(self, path, file):
        self.path = path  # tuple of names below the crate root
        self.file = file
        self.children = {}  # name -> Module
        self.uses = {}  # name -> (absolute path, where)
        self.refs = []  # (absolute path, file, line)


def line_of(text, at):
    return text.count("\n", 0, at) + 1


def read_module(path, file, raw, text, span, top, modules):
    """Reads the module `path` whose code is `text[span[0]:span[1]]` of `file` (`text` is `raw` cleaned, offsets
    alike); `top` is the folder its child files live in. Declared children are read too (files and inline
    modules)."""
    module = Module(path, file)
    modules[path] = module
    body_start, body_end = span
    inner = []  # spans of inline child modules: their code is theirs, not this module's
    for m in re.finditer(r"(?<![\w$])mod\s+(r#)?(\w+)\s*([;{])", text[body_start:body_end]):
        at = body_start + m.start()
        if any(a <= at < b for a, b in inner):
            continue
        name = m.group(2)
        attrs = attributes_before(text, at)
        if m.group(3) == "{":
            open_at = body_start + m.end() - 1
            close = matching_brace(text, open_at)
            inner.append((open_at, close + 1))
            if CFG_TEST.search(attrs):
                continue
            child = read_module(path + (name,), file, raw, text, (open_at + 1, close), top / name, modules)
            module.children[name] = child
        else:
            if CFG_TEST.search(attrs):
                continue
            # `#[path = "…"]` (read in `raw`: its string is blank in `text`), relative to the declaring file's folder.
            path_attr = PATH_ATTR.search(raw[at - len(attrs) : at]) if "#" in attrs else None
            if path_attr:
                candidates = [file.parent / path_attr.group(1)]
            else:
                candidates = [top / f"{name}.rs", top / name / "mod.rs"]
            for candidate in candidates:
                if candidate.is_file():
                    child_raw = candidate.read_text()
                    child_text = clean(child_raw)
                    child_top = candidate.parent if candidate.name == "mod.rs" else candidate.with_suffix("")
                    child = read_module(
                        path + (name,), candidate, child_raw, child_text, (0, len(child_text)), child_top, modules
                    )
                    module.children[name] = child
                    break
            else:
                sys.exit(f"{file}: `mod {name};` names no file under {top}")

    def own(at):
        return not any(a <= at < b for a, b in inner)

    # `use` items (not under #[cfg(test)]).
    for m in re.finditer(r"(?<![\w$])use\s+", text[body_start:body_end]):
        at = body_start + m.start()
        end = text.find(";", at)
        if not own(at):
            continue
        if CFG_TEST.search(attributes_before(text, at)):
            inner.append((at, end))  # nor are its paths read below
            continue
        tree = text[body_start + m.end() : end]
        for segments, name in parse_use_tree(tree):
            absolute = resolve_start(module, segments)
            if absolute is None:
                continue
            where = (file, line_of(text, at))
            if name is not None and name != "self":
                module.uses[name] = (absolute, where)
            module.refs.append((absolute, file, where[1]))
    # Paths in the code.
    for m in re.finditer(r"(?<![\w$:])(?:crate|super|self)(?:::(?:r#)?\w+)+", text[body_start:body_end]):
        at = body_start + m.start()
        if not own(at) or re.search(r"\bin\s*$", text[max(0, at - 8) : at]):
            continue
        segments = m.group(0).replace("r#", "").split("::")
        absolute = resolve_start(module, segments)
        if absolute is not None:
            module.refs.append((absolute, file, line_of(text, at)))
    return module


def resolve_start(module, segments):
    """The absolute path (below the crate root) `segments` names from `module`, or None for another crate's."""
    path = list(module.path)
    segments = [s for s in segments if s]
    if not segments:
        return None
    first = segments[0]
    if first == "crate":
        return tuple(segments[1:])
    if first in ("super", "self"):
        i = 0
        while i < len(segments) and segments[i] in ("super", "self"):
            if segments[i] == "super":
                if not path:
                    return None
                path.pop()
            i += 1
        return tuple(path + segments[i:])
    # A path from a child module declared here (`use engine::Policy` in lib.rs), resolved once the tree is read.
    return ("<relative>",) + tuple(module.path) + ("<from>",) + tuple(segments)


def target_module(modules, absolute, depth=0):
    """The module a path lands in: followed through child modules and the `use` items of each module passed."""
    if absolute and absolute[0] == "<relative>":
        cut = absolute.index("<from>")
        base, rest = absolute[1:cut], absolute[cut + 1 :]
        if rest[0] not in modules[base].children and rest[0] not in modules[base].uses:
            return None  # another crate (`use std::…`, `use protocol::…`)
        absolute = base + rest
    current = ()
    for i, name in enumerate(absolute):
        module = modules.get(current)
        if module is None:
            return current
        if name in module.children:
            current = current + (name,)
        elif name in module.uses and depth < 16:
            through, _ = module.uses[name]
            landed = target_module(modules, tuple(through) + tuple(absolute[i + 1 :]), depth + 1)
            return current if landed is None else landed
        else:
            return current
    return current


def arrows_of(modules):
    """{layer: {a: {b: [(file, line)]}}} where layer is the parent's path."""
    arrows = {}
    for module in modules.values():
        for absolute, file, line in module.refs:
            target = target_module(modules, absolute)
            if target is None:
                continue
            source = module.path
            common = 0
            while common < min(len(source), len(target)) and source[common] == target[common]:
                common += 1
            if common >= len(source) or common >= len(target):
                continue  # to an ancestor or a descendant: no layering question
            layer = source[:common]
            a, b = source[common], target[common]
            places = arrows.setdefault(layer, {}).setdefault(a, {}).setdefault(b, [])
            if (file, line) not in places:
                places.append((file, line))
    return arrows


def cycles_in(graph):
    """The strongly connected components with more than one node (Tarjan), each as a sorted list."""
    index, low, stack, on_stack, result = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return result


def shortest_cycle(graph, component):
    """One shortest cycle through the component's first node, as a list of nodes (first repeated last)."""
    start = component[0]
    members = set(component)
    previous = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph.get(v, {})):
            if w not in members:
                continue
            if w == start:
                path = [v]
                while previous[path[-1]] is not None:
                    path.append(previous[path[-1]])
                return list(reversed(path)) + [start]
            if w not in previous:
                previous[w] = v
                queue.append(w)
    return component + [start]


def read_known(repo):
    """The known cycles: {(root, layer, knot)} as `.ci/import-cycles.known` writes them."""
    known = {}
    path = repo / ".ci" / "import-cycles.known"
    if not path.is_file():
        return known
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"(\S+)\s+(\S+):\s*(.+)", line)
        if not m:
            sys.exit(f"{path}:{number}: not `ROOT LAYER: MODULE MODULE…`: {line}")
        known[(m.group(1), m.group(2), " ".join(sorted(m.group(3).split())))] = number
    return known


SELF_TEST = {
    "Cargo.toml": '[workspace]\nmembers = ["one"]\n',
    # One cycle known (written in another order), one line whose cycle is gone.
    ".ci/import-cycles.known": "# comment\none/src/lib.rs folder: y x  # waits\none/src/lib.rs crate: quiet a\n",
    "one/src/lib.rs": """
        //! Doc: `crate::quiet::X` in a comment is no arrow.
        mod a;
        mod b;
        mod quiet;
        mod folder;
        pub use a::Shared;
    """,
    # a <-> b through the root's re-export of a::Shared, and a path in the code (no `use`).
    "one/src/a.rs": "pub struct Shared;\npub fn f() { crate::b::g() }\n",
    "one/src/b.rs": "use crate::{Shared, quiet as q};\npub fn g() {}\n"
    "#[cfg(test)]\nmod tests { use crate::folder::x; }\n",
    # Only a string, a comment and a test module name a: no arrow quiet -> a.
    "one/src/quiet.rs": 'pub const S: &str = "crate::a::f";\n/* crate::a */\n#[cfg(test)]\nuse crate::a;\n',
    # Among folder's children: x -> y by super::, y -> x through folder's private `use`, in an inline module.
    "one/src/folder/mod.rs": "mod x;\nmod y;\nuse x::Deep;\n",
    "one/src/folder/x.rs": "pub struct Deep;\npub use super::y::{self as why};\n",
    "one/src/folder/y.rs": "mod inner {\n    pub fn h() -> super::super::Deep { todo!() }\n}\n",
}


def self_test():
    """The check on a made-up workspace: its two cycles are found (one new, one known), a known line whose cycle is
    gone fails, and there is no other arrow."""
    import subprocess

    with made_up_workspace(SELF_TEST) as tmp:
        run = subprocess.run([sys.executable, __file__, "--arrows", tmp], capture_output=True, text=True)
    found = sorted(line for line in run.stdout.splitlines() if line.startswith(("NEW", "known", "GONE")))
    arrows = sorted(line for line in run.stdout.splitlines() if line.startswith("one/"))
    expected_cycles = [
        "GONE: .ci/import-cycles.known:3 (one/src/lib.rs crate: a quiet) is no cycle now: delete the line",
        "NEW: one/src/lib.rs, among the crate root's modules: a -> b -> a",
        "known (.ci/import-cycles.known:2): one/src/lib.rs, among folder's children: x -> y -> x",
    ]
    expected_arrows = [
        "one/src/lib.rs crate: a -> b",
        "one/src/lib.rs crate: b -> a, quiet",
        "one/src/lib.rs folder: x -> y",
        "one/src/lib.rs folder: y -> x",
    ]
    if run.returncode != 1 or found != expected_cycles or arrows != expected_arrows:
        print(f"self-test failed (exit {run.returncode}):\n{run.stdout}{run.stderr}")
        return 1
    print("self-test: a new cycle, a known one and a gone one told apart; no arrow from a comment, a string or a test")
    return 0


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        return self_test()
    show_arrows = "--arrows" in args
    args = [a for a in args if a != "--arrows"]
    repo = Path(args[0] if args else Path(__file__).resolve().parent.parent)
    crates = members(repo)
    known = read_known(repo)
    seen = set()
    failed = 0
    listed = 0
    checked = 0
    for crate_dir in crates:
        for root in crate_roots(crate_dir):
            raw = root.read_text()
            text = clean(raw)
            modules = {}
            read_module((), root, raw, text, (0, len(text)), root.parent, modules)
            checked += len(modules)
            rel_root = str(root.relative_to(repo))
            for layer, graph in sorted(arrows_of(modules).items()):
                layer_name = "::".join(layer) if layer else "crate"
                if show_arrows:
                    for a in sorted(graph):
                        print(f"{rel_root} {layer_name}: {a} -> {', '.join(sorted(graph[a]))}")
                for component in cycles_in(graph):
                    key = (rel_root, layer_name, " ".join(component))
                    seen.add(key)
                    if key in known:
                        listed += 1
                        status = f"known (.ci/import-cycles.known:{known[key]})"
                    else:
                        failed += 1
                        status = "NEW"
                    cycle = shortest_cycle(graph, component)
                    where = f"{layer_name}'s children" if layer else "the crate root's modules"
                    print(f"{status}: {rel_root}, among {where}: {' -> '.join(cycle)}")
                    if len(component) > len(cycle) - 1:
                        print(f"    (the whole knot: {', '.join(component)})")
                    for a, b in zip(cycle, cycle[1:]):
                        places = graph[a][b]
                        shown = ", ".join(f"{f.relative_to(repo)}:{line}" for f, line in places[:3])
                        more = f" (+{len(places) - 3} more)" if len(places) > 3 else ""
                        print(f"    {a} -> {b}: {shown}{more}")
    for key, number in sorted(known.items(), key=lambda item: item[1]):
        if key not in seen:
            failed += 1
            line = f"{key[0]} {key[1]}: {key[2]}"
            print(f"GONE: .ci/import-cycles.known:{number} ({line}) is no cycle now: delete the line")
    if not failed:
        print(f"no import cycles but {listed} known ({checked} modules in {len(crates)} crates)")
        return 0
    print(f"{failed} import cycle(s) new or gone from the known list: each layer's arrows must go one way", end=" ")
    print("(move what both ends need below them, or into the parent)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
