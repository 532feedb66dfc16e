"""Every reference in the code, tests and docs resolves: to a file, module or section of
this repository, or to a public source (an RFC, the MCP specification, a public bug report).

Checked here, in the repository's own text (bridge/, tests/, docs/, bench/, build/,
examples/, .ci/, .github/, and the top-level pyproject.toml, mkdocs.yml, README.md and
CONTRIBUTING.md; CHANGELOG.md is history and may name what was):

- no citation of a document that is not in the repository (the design notes, hazard list,
  spec checklist and reviews the project was planned with: a reader cannot open them);
- every ``bridge/…py`` path names a file that exists (or is marked as history: "then
  ``bridge/old.py``", "was ``bridge/old.py``");
- every dotted ``bridge.PACKAGE.…`` name in prose (Python comments and strings, other
  files whole) is a module, or a module and a name defined in it, or a logger name;
- every ``FILE.md, "Section"`` (or ``README, "Section"``) names a heading of that file;
- none of the stale names a moved module left behind.
"""

from __future__ import annotations

import io
import os
import re
import tokenize
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
ROOTS = ["bridge", "tests", "docs", "bench", "build", "examples", ".ci", ".github"]
TOP_FILES = ["pyproject.toml", "mkdocs.yml", "README.md", "CONTRIBUTING.md"]
SUFFIXES = {".py", ".md", ".toml", ".spec", ".yml", ".yaml", ".txt", ".cfg", ".cjs", ".js", ""}
SKIP_DIRS = {"node_modules", "__pycache__", ".venv", "out", "work", ".mypy_cache", ".pytest_cache", "site"}
THIS_FILE = Path(__file__).resolve()

#: Citations of documents outside the repository, and the stale names of moved code.
FORBIDDEN = {
    "a planning document outside the repository": re.compile(
        r"DESIGN\.md|DESIGN §|SPEC-CHECKLIST|HAZARDS(?:\.md| B\d)|ARCHITECTURE\.md|STYLE\.md|PEERS\.md"
        r"|\.\./shared|/work/(?:shared|main|helpers)"
    ),
    "a hazard-list label (write the rule, or the public report, instead)": re.compile(r"\(B\d\d\b|-- B\d\d\b"),
    "a stale name of moved code": re.compile(
        r"bridge\.clientfiles|bridge\.clientconfig|bridge\.jsonc\b|bridge/verifiedconnect\.py|bridge/cli\.py"
        r"|bridge/bundle\.py|Bridge\._relay|docs/_incoming"
    ),
}

BRIDGE_PATH = re.compile(r"(?<![\w/.-])bridge/[\w/]+\.py\b")
#: ``bridge.`` followed by one of the package's own modules or subpackages (``bridge.log``, a
#: file name, or ``bridge.stop``, an attribute in an f-string, are not module paths).
PACKAGE_PARTS = "|".join(sorted(path.stem for path in (REPO_ROOT / "bridge").iterdir() if path.suffix == ".py" or (path / "__init__.py").is_file()))
BRIDGE_NAME = re.compile(rf"(?<![\w/.-])bridge\.(?:{PACKAGE_PARTS})\b(?:\.[A-Za-z_]\w*)*")
SECTION = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md|README),? \"([^\"\n]+)\"")


def repository_files() -> Iterator[Path]:
    for name in TOP_FILES:
        yield REPO_ROOT / name
    for root in ROOTS:
        for folder, dirs, files in os.walk(REPO_ROOT / root):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            for file in files:
                path = Path(folder) / file
                if path.suffix in SUFFIXES and path.resolve() != THIS_FILE:
                    yield path


def texts() -> list[tuple[str, str]]:
    found = []
    for path in repository_files():
        try:
            found.append((path.relative_to(REPO_ROOT).as_posix(), path.read_text(encoding="utf-8")))
        except (UnicodeDecodeError, FileNotFoundError):
            continue
    return found


TEXTS = texts()


def prose(name: str, text: str) -> str:
    """``text`` with a Python file's code blanked out (its comments and strings kept, at
    their places), so that a variable called ``bridge`` is not taken for the package."""
    if not name.endswith((".py", ".spec")):
        return text
    lines = text.splitlines(keepends=True)
    kept = ["".join(" " if char != "\n" else char for char in line) for line in lines]
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.COMMENT, tokenize.STRING):
                (row, col), (end_row, end_col) = token.start, token.end
                for number in range(row, end_row + 1):
                    line = lines[number - 1]
                    start = col if number == row else 0
                    stop = end_col if number == end_row else len(line)
                    kept[number - 1] = kept[number - 1][:start] + line[start:stop] + kept[number - 1][stop:]
    except (tokenize.TokenError, SyntaxError):
        return text
    return "".join(kept)


def hits(pattern: re.Pattern[str], *, prose_only: bool = False) -> Iterator[tuple[str, int, re.Match[str]]]:
    for name, text in TEXTS:
        searched = prose(name, text) if prose_only else text
        for match in pattern.finditer(searched):
            yield name, searched.count("\n", 0, match.start()) + 1, match


def test_the_walk_sees_the_repository() -> None:
    names = {name for name, _ in TEXTS}
    assert {"bridge/serve/loop.py", "docs/behaviour.md", "CONTRIBUTING.md", "pyproject.toml"} <= names


@pytest.mark.parametrize("kind", sorted(FORBIDDEN))
def test_no_reference_points_outside_the_repository_or_to_moved_code(kind: str) -> None:
    found = [f"{name}:{line}: {match.group(0)}" for name, line, match in hits(FORBIDDEN[kind])]
    assert not found, f"{kind}:\n" + "\n".join(found)


def test_every_bridge_path_exists() -> None:
    missing = [
        f"{name}:{line}: {match.group(0)}"
        for name, line, match in hits(BRIDGE_PATH)
        if not (REPO_ROOT / match.group(0)).is_file() and not re.search(r"\b(?:then|was) `*$", match.string[: match.start()])
    ]
    assert not missing, "\n".join(missing)


def _logger_names() -> set[str]:
    names = set()
    for name, text in TEXTS:
        if name.startswith("bridge/"):
            names.update(re.findall(r"getLogger\(\"([\w.]+)\"\)", text))
    return names


def _resolves(dotted: str) -> bool:
    """Whether ``bridge.a.b.c`` is a module, or a module and names defined in its source."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = REPO_ROOT.joinpath(*parts[:cut])
        for source in (base.with_suffix(".py"), base / "__init__.py"):
            if source.is_file():
                rest = parts[cut:]
                return not rest or re.search(rf"\b{re.escape(rest[0])}\b", source.read_text(encoding="utf-8")) is not None
    return False


def test_every_dotted_bridge_name_resolves() -> None:
    loggers = _logger_names()
    unresolved = [
        f"{name}:{line}: {match.group(0)}"
        for name, line, match in hits(BRIDGE_NAME, prose_only=True)
        if match.group(0) not in loggers and not _resolves(match.group(0).rstrip("."))
    ]
    assert not unresolved, "\n".join(unresolved)


def _headings(document: Path) -> set[str]:
    text = document.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # a '#' line in a code block is no heading
    found = re.findall(r"^#+ (.+)$", text, re.M) + re.findall(r"^\*\*([^*\n]+)\*\*", text, re.M)  # headings, bold paragraph labels
    return {re.sub(r"[`*]", "", heading).strip() for heading in found}


def test_every_cited_section_is_a_heading_of_its_file() -> None:
    wrong = []
    for name, line, match in hits(SECTION):
        cited, section = match.group(1), match.group(2)
        document = REPO_ROOT / ("README.md" if cited == "README" else cited)
        if not document.is_file():
            document = (REPO_ROOT / name).parent / cited
        if not document.is_file():
            wrong.append(f"{name}:{line}: {cited} is not a file of the repository")
        elif not any(heading == section or heading.startswith(section) for heading in _headings(document)):
            wrong.append(f"{name}:{line}: {cited} has no section {section!r}")
    assert not wrong, "\n".join(wrong)


# A link to a section, ``[text](#anchor)`` or ``[text](file.md#anchor)``, is read in two
# places: on the docs site (Python-Markdown's toc slug) and on GitHub (its own slug, which
# keeps each hyphen and space: "A (`--x`)" is "a---x" there and "a-x" on the site). A
# heading whose two slugs differ breaks one of the two, so an anchor must be both.
_LINK_TO_SECTION = re.compile(r"\]\(((?:[A-Za-z0-9_./-]+\.md)?)#([^)\s]+)\)")
_MARKDOWN_FILES = [REPO_ROOT / "README.md", REPO_ROOT / "CONTRIBUTING.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


def _site_slug(heading: str) -> str:
    """Python-Markdown's ``toc`` slugify (the site), of the heading as rendered."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def _github_slug(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation but ``-`` and ``_`` dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _rendered_headings(document: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", document.read_text(encoding="utf-8"), flags=re.S | re.M)
    return [re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip() for heading in re.findall(r"^#+ (.+)$", text, re.M)]


def test_every_link_to_a_section_works_on_the_site_and_on_github() -> None:
    wrong = []
    for document in _MARKDOWN_FILES:
        for number, text in enumerate(document.read_text(encoding="utf-8").splitlines(), 1):
            for target, anchor in _LINK_TO_SECTION.findall(text):
                linked = (document.parent / target).resolve() if target else document
                if not linked.is_file():
                    continue  # a missing file is the other tests' finding
                headings = _rendered_headings(linked)
                on_site = {_site_slug(heading) for heading in headings}
                on_github = {_github_slug(heading) for heading in headings}
                if anchor not in on_site or anchor not in on_github:
                    where = "neither" if anchor not in on_site | on_github else "the site" if anchor in on_site else "GitHub"
                    wrong.append(f"{document.relative_to(REPO_ROOT)}:{number}: #{anchor} works on {where} only")
    assert not wrong, "\n".join(wrong)
