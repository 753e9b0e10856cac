#!/usr/bin/env python3
"""Fails when one type name is defined in the public faces of two crates, naming the name and where each is.

A reader who meets `TokenError` or `Target` must not have to ask which crate's: a name public in two crates means
two things to whoever reads both. Counted: every `pub struct|enum|trait|type|union NAME` (plain `pub`, not
`pub(crate)` or `pub(super)`) in the `src/` of each workspace crate, outside `#[cfg(test)]` modules; comments and
literals are blanked first. Within one crate a repeated name is a naming matter for review, not for this check.

A name listed in `.ci/type-names.known` (one a line: the name, then its crates) is reported but does not fail; the
list only shrinks (a listed name defined in fewer crates now fails until its line is deleted or corrected).

    .ci/type-names.py [REPO]        exit 0: no collision but the known ones; 1: otherwise
    .ci/type-names.py --self-test   the check against a made-up workspace
"""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rust_source import (  # noqa: E402
    check_main,
    clean,
    members,
    run_on_made_up_workspace,
    self_test_result,
    test_files,
    test_spans,
)

PUBLIC_TYPE = re.compile(r"(?<![\w(])pub\s+(?:struct|enum|trait|type|union)\s+(?:r#)?(\w+)")


def public_types(repo):
    """{name: {crate: [(file, line)]}}."""
    found = {}
    for crate in members(repo):
        src = crate / "src"
        if not src.is_dir():
            continue
        tests = test_files(src)
        for file in sorted(src.rglob("*.rs")):
            if file in tests:
                continue
            text = clean(file.read_text())
            skip = test_spans(text)
            for m in PUBLIC_TYPE.finditer(text):
                if any(a <= m.start() <= b for a, b in skip):
                    continue
                line = text.count("\n", 0, m.start()) + 1
                found.setdefault(m.group(1), {}).setdefault(crate.name, []).append((file.relative_to(repo), line))
    return found


def read_known(repo):
    known = {}
    path = repo / ".ci/type-names.known"
    if path.is_file():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            words = line.split("#", 1)[0].split()
            if words:
                known[words[0]] = (tuple(sorted(words[1:])), number)
    return known


def check(repo):
    known = read_known(repo)
    failed = listed = 0
    types = public_types(repo)
    for name, crates in sorted(types.items()):
        if len(crates) < 2:
            continue
        where = "; ".join(f"{crate}: {file}:{line}" for crate, places in sorted(crates.items()) for file, line in places[:1])
        if name in known and known[name][0] == tuple(sorted(crates)):
            listed += 1
            print(f"known (.ci/type-names.known:{known[name][1]}): {name} in {where}")
        else:
            failed += 1
            print(f"NEW: {name} is public in {len(crates)} crates: {where}")
    for name, (crates, number) in sorted(known.items(), key=lambda item: item[1][1]):
        now = tuple(sorted(types.get(name, {})))
        if now != crates and len(now) < len(crates):
            failed += 1
            print(f"GONE: .ci/type-names.known:{number} ({name} in {', '.join(crates)}) is public in "
                  f"{', '.join(now) or 'no crate'} now: delete or correct the line")
    if failed:
        print(f"{failed} type name(s) public in two crates, or changed on the known list: name each for what it is "
              "in its crate (the known list only shrinks)")
        return 1
    print(f"no type name public in two crates but {listed} known ({len(types)} public type names)")
    return 0


def self_test():
    files = {
        "Cargo.toml": '[workspace]\nmembers = ["one", "two"]\n',
        ".ci/type-names.known": "Listed one two\nGone one two  # renamed since\n",
        "one/src/lib.rs": "pub struct Clash;\npub enum Listed {}\npub struct Gone;\npub(crate) struct Private;\n"
        "#[cfg(test)]\nmod tests { pub struct InTest; }\n// pub struct Commented;\n",
        "two/src/lib.rs": "pub trait Clash {}\npub type Listed = u8;\npub(crate) struct Private;\n"
        "pub struct InTest;\nconst S: &str = \"pub struct Gone;\";\n",
    }
    code, lines = run_on_made_up_workspace(files, check)
    expected = [
        "NEW: Clash is public in 2 crates: one: one/src/lib.rs:1; two: two/src/lib.rs:1",
        "known (.ci/type-names.known:1): Listed in one: one/src/lib.rs:2; two: two/src/lib.rs:2",
        "GONE: .ci/type-names.known:2 (Gone in one, two) is public in one now: delete or correct the line",
    ]
    passed = "a collision, a known one and a gone one told apart; private, test and literal names left out"
    return self_test_result(code, lines, expected, passed)


if __name__ == "__main__":
    sys.exit(check_main(sys.argv[1:], check, self_test))
