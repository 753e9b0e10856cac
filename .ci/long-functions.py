#!/usr/bin/env python3
"""Fails when a function outside tests is 100 lines or longer, naming it, its file and line, and its length.

A long function buries its policy: the house keeps deciders small and testable (`fn next_step(…) -> Step`) with the
I/O around them, so a function reaches 100 lines only by mixing the two. Counted: every `fn` with a body in the
`src/` of each workspace crate (testkit is the tests' own support, and is left out), from the line of `fn` to the
line of its closing brace; a nested `fn` counts on its own and within its parent. Not counted: `#[cfg(test)]`
modules (inline, or files declared with `#[cfg(test)] mod NAME;`), functions with a test attribute (`#[test]`,
`#[tokio::test]`, …), comments and string literals (blanked before braces are matched).

A function listed in `.ci/long-functions.known` (one a line: `path::to::file.rs fn_name`) is reported but does not
fail: the list only shrinks (a listed function now short, or gone, fails until its line is deleted).

    .ci/long-functions.py [REPO]        exit 0: none but the known ones; 1: otherwise
    .ci/long-functions.py --self-test   the check against a made-up workspace
"""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rust_source import (  # noqa: E402
    check_main,
    self_test_result,
    attributes_before,
    clean,
    matching_brace,
    members,
    run_on_made_up_workspace,
    test_files,
    test_spans,
)

LIMIT = 100
LEFT_OUT = {"testkit"}
TEST_ATTR = re.compile(r"#\[\s*(?:\w+::)*test\b")
FN = re.compile(r"(?<![\w$])fn\s+(r#)?(\w+)")


def body_start(text, at):
    """The offset of the `{` that opens the body of the `fn` at `at`, or None for a declaration without one (`;`
    outside brackets and parentheses: `[u8; 4]` in a signature is not the end)."""
    depth = 0
    for j in range(at, len(text)):
        c = text[j]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "{" and depth == 0:
            return j
        elif c == ";" and depth == 0:
            return None
    return None


def long_functions(file):
    """[(name, line, length)] of the file's functions of LIMIT lines or more, tests left out."""
    text = clean(file.read_text())
    skip = test_spans(text)
    found = []
    for m in FN.finditer(text):
        at = m.start()
        if any(a <= at <= b for a, b in skip) or TEST_ATTR.search(attributes_before(text, at)):
            continue
        open_at = body_start(text, m.end())
        if open_at is None:
            continue
        close = matching_brace(text, open_at)
        first = text.count("\n", 0, at) + 1
        last = text.count("\n", 0, close) + 1
        if last - first + 1 >= LIMIT:
            found.append((m.group(2), first, last - first + 1))
    return found


def read_known(repo):
    known = {}
    path = repo / ".ci/long-functions.known"
    if path.is_file():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if line:
                file, name = line.split()
                known[(file, name)] = number
    return known


def check(repo):
    known = read_known(repo)
    seen = set()
    failed = listed = counted = 0
    for crate in members(repo):
        if crate.name in LEFT_OUT or not (crate / "src").is_dir():
            continue
        tests = test_files(crate / "src")
        for file in sorted((crate / "src").rglob("*.rs")):
            if file in tests:
                continue
            counted += 1
            rel = str(file.relative_to(repo))
            for name, line, length in long_functions(file):
                key = (rel, name)
                seen.add(key)
                if key in known:
                    listed += 1
                    print(f"known (.ci/long-functions.known:{known[key]}): {rel}:{line} fn {name}: {length} lines")
                else:
                    failed += 1
                    print(f"NEW: {rel}:{line} fn {name}: {length} lines (at most {LIMIT - 1})")
    for key, number in sorted(known.items(), key=lambda item: item[1]):
        if key not in seen:
            failed += 1
            print(f"GONE: .ci/long-functions.known:{number} ({key[0]} {key[1]}) is under {LIMIT} lines now: delete it")
    if failed:
        print(f"{failed} function(s) of {LIMIT} lines or more, or gone from the known list: split each into a small")
        print("decider and the I/O around it (the known list only shrinks)")
        return 1
    print(f"no function of {LIMIT} lines or more outside tests but {listed} known ({counted} files)")
    return 0


def self_test():
    long_body = "\n".join(f"    let x{i} = {i};" for i in range(LIMIT))
    files = {
        "Cargo.toml": '[workspace]\nmembers = ["one", "testkit"]\n',
        ".ci/long-functions.known": "one/src/lib.rs listed\none/src/lib.rs gone  # now short\n",
        "one/src/lib.rs": f"""
#[cfg(test)]
mod tests;
pub fn short() {{ let s = "}}}}}}"; }}
pub fn long(a: [u8; 4]) -> u8 {{
{long_body}
    a[0]
}}
pub fn listed() {{
{long_body}
}}
pub fn gone() {{}}
trait T {{ fn declared(&self) -> [u8; 2]; }}
#[cfg(test)]
mod inline {{
    fn in_test_module() {{
{long_body}
    }}
}}
#[tokio::test]
async fn a_test() {{
{long_body}
}}
""",
        "one/src/tests.rs": f"fn in_test_file() {{\n{long_body}\n}}\n",
        "testkit/src/lib.rs": f"pub fn support() {{\n{long_body}\n}}\n",
    }
    code, lines = run_on_made_up_workspace(files, check)
    expected = [
        f"NEW: one/src/lib.rs:5 fn long: {LIMIT + 3} lines (at most {LIMIT - 1})",
        f"known (.ci/long-functions.known:1): one/src/lib.rs:{5 + LIMIT + 3} fn listed: {LIMIT + 2} lines",
        f"GONE: .ci/long-functions.known:2 (one/src/lib.rs gone) is under {LIMIT} lines now: delete it",
    ]
    passed = "a long function, a known one and a gone one told apart; tests, support and literals left out"
    return self_test_result(code, lines, expected, passed)


if __name__ == "__main__":
    sys.exit(check_main(sys.argv[1:], check, self_test))
