"""What the .ci checks of Rust source share: the source with comments and literals blanked, brace matching, the
attributes before an item, and the workspace's crates."""

import contextlib
import io
import re
import tempfile
import textwrap
import tomllib
from pathlib import Path


def clean(text):
    """The text with comments and the insides of string and char literals blanked (lines kept), so that braces,
    `mod` and paths can be found with regular expressions."""
    out = []
    i, n = 0, len(text)
    char_literal = re.compile(r"'(?:\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'\n])'")
    raw_string = re.compile(r'b?r(#*)"')

    def ident_before(at):
        return at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_")

    def blank(chunk):
        return "".join(c if c == "\n" else " " for c in chunk)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif (m := raw_string.match(text, i)) and not ident_before(i):
            end = text.find('"' + m.group(1), m.end())
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append(blank(text[i:end]))
            i = end
        elif c == '"' or (text.startswith('b"', i) and not ident_before(i)):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i : j + 1]))
            i = j + 1
        elif c == "'" and (m := char_literal.match(text, i)):
            out.append(blank(m.group(0)))
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(text, open_at):
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text)


def attributes_before(text, at):
    """The attributes and visibility written just before the item at `at`."""
    start = max(text.rfind(";", 0, at), text.rfind("}", 0, at), text.rfind("{", 0, at)) + 1
    return text[start:at]


CFG_TEST = re.compile(r"#\[\s*cfg\s*\(\s*test\s*\)\s*\]")


def members(repo):
    """The workspace's member crates' folders, as Cargo.toml lists them (fuzz/targets is a workspace of its own)."""
    with open(repo / "Cargo.toml", "rb") as manifest:
        return [repo / member for member in tomllib.load(manifest)["workspace"]["members"]]


def crate_roots(crate_dir):
    src = crate_dir / "src"
    roots = [p for p in (src / "lib.rs", src / "main.rs") if p.is_file()]
    bin_dir = src / "bin"
    if bin_dir.is_dir():
        for entry in sorted(bin_dir.iterdir()):
            if entry.suffix == ".rs":
                roots.append(entry)
            elif (entry / "main.rs").is_file():
                roots.append(entry / "main.rs")
    return roots


TEST_MOD_DECL = re.compile(r"#\[\s*cfg\s*\(\s*test\s*\)\s*\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")


def test_spans(text):
    """The spans of inline `#[cfg(test)] mod … { … }` blocks."""
    spans = []
    for m in re.finditer(r"(?<![\w$])mod\s+\w+\s*\{", text):
        if CFG_TEST.search(attributes_before(text, m.start())):
            open_at = m.end() - 1
            spans.append((open_at, matching_brace(text, open_at)))
    return spans


def test_files(src):
    """The files of modules declared `#[cfg(test)] mod NAME;`: NAME.rs or NAME/mod.rs beside the declaring file
    (in its own folder for a mod.rs, lib.rs or main.rs), and every file below NAME/."""
    out = set()
    for file in src.rglob("*.rs"):
        for m in TEST_MOD_DECL.finditer(clean(file.read_text())):
            folder = file.parent if file.name in ("mod.rs", "lib.rs", "main.rs") else file.with_suffix("")
            name = m.group(1)
            out.add(folder / f"{name}.rs")
            out.update((folder / name).rglob("*.rs"))
    return out


@contextlib.contextmanager
def made_up_workspace(files):
    """A temporary folder holding `files` ({relative path: text, dedented}), for a check's --self-test."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in files.items():
            path = Path(tmp) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
        yield Path(tmp)


def run_on_made_up_workspace(files, check):
    """`check(repo)` on a made-up workspace of `files`: its exit code and the lines it printed."""
    with made_up_workspace(files) as repo:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = check(repo)
    return code, out.getvalue().splitlines()


def self_test_result(code, lines, expected, passed):
    """A --self-test's verdict: exit 0 with `passed` when the check failed (exit 1) with `expected` as its first
    lines, else exit 1 with what it printed."""
    if code != 1 or lines[: len(expected)] != expected:
        print("self-test failed:\n" + "\n".join(lines))
        return 1
    print(f"self-test: {passed}")
    return 0


def check_main(argv, check, self_test):
    """A check's command line: `--self-test`, or the check on REPO (default: the checkout this file is in)."""
    if argv == ["--self-test"]:
        return self_test()
    return check(Path(argv[0] if argv else Path(__file__).resolve().parent.parent))
