#!/usr/bin/env python3
"""Fails when a doc quotes a benchmark figure that BENCHMARKS.md does not hold.

Each figure lives in BENCHMARKS.md once (bench/run.sh writes it); README.md and docs/*.md link to its section. A
figure copied into a doc goes stale at the next run (that is how the README came to show blocking throughput at
twice its measured value), so this check (CI runs it) reads every figure in the forms a benchmark writes (times in
ms and µs, throughput in MiB/s, MB/s, GiB/s or GB/s, ratios like 9×, percentages) from the docs and fails on each one
BENCHMARKS.md does not hold, with its file, line and the text around it.

A figure counts as held when BENCHMARKS.md has the same number in the same unit anywhere (its sign, spaces and the
kind of dash are ignored, and so is its sign unless the doc writes one: "+0.46–0.51 ms" holds "0.46-0.51 ms"). A number that is a setting or a design constant and
not a measurement (a 200 ms timer) is no figure: DESIGN_VALUES lists those the docs use, each with what it is. A
multiplication (`2 × --max-output`, spaces around ×) and a size (`30×100`) are not ratios.

The same holds for the source's doc comments (`//!` and `///` lines in every `.rs` file of the workspace and of
bench/): a comment that quotes a measured figure is a doc too, and goes stale the same way.

It also fails on a link to a BENCHMARKS.md section (`BENCHMARKS.md#p2-throughput`) that the file does not have: a
renamed heading would leave the docs pointing nowhere.

Usage: bench/check-doc-figures.py [ROOT]   (ROOT defaults to the checkout this script is in)
"""

import pathlib
import re
import sys

# Settings and design constants the docs name, by figure: not measurements, so BENCHMARKS.md need not hold them.
DESIGN_VALUES = {
    "200 ms": "exec-server reaps adopted zombies on a 200 ms timer",
    "50 ms": "the escapee sweep's batch; the client's first resume backoff",
    "20 ms": "how long a partial line waits before it is sent",
    "250 ms": "the accept loop's retry; how long ssh-exec lets leftovers hold the output",
    "10 ms": "ssh-exec's retry for a free session slot",
    "5 ms": "the smallest bucket of the command-duration histogram",
    "150 ms": "the agent-runner's poll of the prompt folder",
}

UNITS = r"ms|µs|us|MiB/s|MB/s|GiB/s|GB/s|%"
NUMBER = r"\d+(?:[.,]\d+)?"
SIGN = r"(?:(?<=[\s(])[+−-])?"
DASH = r"\s?[–—-]\s?"
# A number or a range ("0.46–0.51 ms", "93–105%"), or a list of them ("1.81 / 2.36 ms"), then a unit (a space may
# stand between), not inside a word; a sign written against the number is part of it.
ONE = rf"{SIGN}{NUMBER}(?:{DASH}{NUMBER})?"
FIGURE = re.compile(rf"(?<![\w.])({ONE}(?:\s?/\s?{ONE})*)\s?({UNITS})(?![\w/])")
# A ratio: "9×", "2.74×"; "9 × slower" is not one (see above), "30×100" is a size.
RATIO = re.compile(rf"(?<![\w.])({ONE})(×)(?!\d)")


def normal(figure: str) -> str:
    """The figure without spaces and with one kind of dash and minus: what two spellings of one figure share."""
    return re.sub(r"[–—]", "-", re.sub(r"\s", "", figure)).replace("−", "-")


def figures(text: str):
    """Each figure in `text`, as (its match, the figure normalised), one per number of a list."""
    for pattern in (FIGURE, RATIO):
        for match in pattern.finditer(text):
            for number in match.group(1).split("/"):
                yield match, normal(number + match.group(2))


def unsigned(figure: str) -> str:
    return figure.lstrip("+-")


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


# A link into BENCHMARKS.md's sections: `BENCHMARKS.md#p2-throughput`.
SECTION_LINK = re.compile(r"BENCHMARKS\.md#([\w\-]+)")
def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    benchmarks = (root / "BENCHMARKS.md").read_text(encoding="utf-8")
    held = {form for _, figure in figures(benchmarks) for form in (figure, unsigned(figure))}
    allowed = {normal(value) for value in DESIGN_VALUES}
    sections = {anchor(line.lstrip("#")) for line in benchmarks.splitlines() if line.startswith("#")}
    docs = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    sources = sorted(
        path
        for path in root.rglob("*.rs")
        if not {"target", ".git"} & set(path.relative_to(root).parts)
    )
    stale = 0
    checked = 0
    for doc in docs + sources:
        lines = doc.read_text(encoding="utf-8").splitlines()
        if doc.suffix == ".rs":
            lines = [line if line.lstrip().startswith(("///", "//!")) else "" for line in lines]
        for number, line in enumerate(lines, 1):
            for link in SECTION_LINK.finditer(line):
                if link.group(1) not in sections:
                    stale += 1
                    print(f"{doc.relative_to(root)}:{number}: BENCHMARKS.md has no section #{link.group(1)}")
            for match, figure in figures(line):
                checked += 1
                # A figure written with its sign must be held with it; one without matches either sign.
                if figure in held or unsigned(figure) in allowed:
                    continue
                stale += 1
                start, end = max(match.start() - 50, 0), min(match.end() + 30, len(line))
                print(f"{doc.relative_to(root)}:{number}: {figure!r} is not in BENCHMARKS.md: …{line[start:end]}…")
    if stale:
        print(
            f"{stale} problems in README.md, docs/*.md and doc comments ({checked} figures): link to a BENCHMARKS.md section "
            "that exists instead of quoting a figure (or, for a setting that is no measurement, add it to "
            "DESIGN_VALUES in this script)"
        )
        return 1
    print(f"{checked} figures in README.md, docs/*.md and doc comments: each is in BENCHMARKS.md or a design value")
    return 0


if __name__ == "__main__":
    sys.exit(main())
