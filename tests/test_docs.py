"""The design lives in docs/, and what cites it can find it.

* Every `docs/<file>.md` named in code, docs, README, the Makefile or
  .ci/run exists, and a section cited as `(docs/<file>.md, "<heading>")`
  is a heading of that file. Markdown links between the docs (and from README)
  point at files and headings that exist.
* Nothing cites a design file outside the repository or an issue number: a
  reader of the code has only the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGES = (
    "core",
    "graphs",
    "sessions_app",
    "turns_app",
    "langgraph_app",
    "agentsite",
    "bench",
    "tests",
    "deploy",
    "docs",
)
FILES = ("README.md", "Makefile", ".ci/run")
SUFFIXES = {
    ".py",
    ".md",
    ".html",
    ".txt",
    ".template",
    ".conf",
    ".yml",
    ".yaml",
    ".toml",
    ".mjs",
    ".sh",
    ".cfg",
    ".ini",
}
# Vendored text that is not ours to word: LangGraph's published OpenAPI.
VENDORED = (ROOT / "tests" / "langgraph_api" / "spec", ROOT / "tests" / "vendor" / "langgraph_sdk_integration")
HERE = Path(__file__).resolve()

DOC_NAME = re.compile(r"docs/([\w.-]+\.md)")
# `docs/<file>.md, "<heading>"`, in parentheses or not, also when a comment
# wraps after the comma or inside the heading.
SECTION = re.compile(r'docs/([\w.-]+\.md),(?:\s|#)*"([^"]+)"')
FORBIDDEN = {
    "a design file outside the repository": re.compile(r"DESIGN\.md|FIELD-NOTES|\.\./shared|/work/shared"),
    "an issue number": re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE),
}
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def scanned() -> list[Path]:
    paths = [ROOT / name for name in FILES if (ROOT / name).is_file()]
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*")):
            if (
                path.is_file()
                and path.suffix in SUFFIXES
                and "node_modules" not in path.parts
                and not any(path.is_relative_to(v) for v in VENDORED)
            ):
                paths.append(path)
    return paths


def headings(doc: Path) -> list[str]:
    """A Markdown file's headings, outside code blocks."""
    return [h.strip() for h in HEADING.findall(FENCE.sub("", doc.read_text()))]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def where(path: Path, text: str, index: int) -> str:
    return f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, index) + 1}"


def test_the_docs_are_there():
    expected = {
        "README.md",
        "architecture.md",
        "turn-protocol.md",
        "invariants.md",
        "storage.md",
        "scale.md",
        "field-notes.md",
        "api.md",
        "agent-protocol.md",
        "graphs.md",
        "operations.md",
        "configuration.md",
        "development.md",
    }
    assert expected <= {p.name for p in DOCS.glob("*.md")}
    index = (DOCS / "README.md").read_text()
    assert sorted(name for name in expected - {"README.md"} if f"({name})" not in index) == []


def test_every_cited_doc_and_section_exists():
    missing = []
    for path in scanned():
        text = path.read_text(errors="replace")
        for match in DOC_NAME.finditer(text):
            if not (DOCS / match.group(1)).is_file():
                missing.append(f"{where(path, text, match.start())}: docs/{match.group(1)}")
        for match in SECTION.finditer(text):
            doc, section = DOCS / match.group(1), " ".join(re.sub(r"\n\s*#", " ", match.group(2)).split())
            if doc.is_file() and section not in headings(doc):
                missing.append(f'{where(path, text, match.start())}: (docs/{match.group(1)}, "{section}")')
    assert missing == []


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("doc", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_between_the_docs_resolve(doc: Path):
    text = FENCE.sub("", doc.read_text())
    broken = []
    for target in LINK.findall(text):
        if re.match(r"\w+:", target):
            continue  # another site
        file, _, anchor = target.partition("#")
        linked = (doc.parent / file).resolve() if file else doc
        if not linked.exists() or (
            anchor and linked.suffix == ".md" and anchor not in {slug(h) for h in headings(linked)}
        ):
            broken.append(target)
    assert broken == []


def test_nothing_cites_what_a_reader_of_the_repository_cannot_read():
    found = []
    for path in scanned():
        if path.resolve() == HERE:
            continue  # the patterns themselves
        text = path.read_text(errors="replace")
        for what, pattern in FORBIDDEN.items():
            for match in pattern.finditer(text):
                found.append(f"{where(path, text, match.start())}: {what}: {match.group(0)!r}")
    assert found == []
