"""Every relative link in README.md and docs/*.md resolves: ``[text](page.md)`` to an existing file, and
``[text](page.md#anchor)`` or ``[text](#anchor)`` to a heading of that page, with GitHub's anchors (lowercase,
punctuation dropped, spaces as hyphens, ``-1``, ``-2`` for repeated headings). Links inside code are not links."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *(p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "docs").glob("*.md")))]
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text: lowercase, every character but letters, digits, ``_``, ``-`` and
    spaces dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code spans removed."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`[^`]*`", "", line) if not HEADING.match(line) else line)
    return lines


def anchors(text: str) -> set[str]:
    """The anchors of a page's headings, repeated ones numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(text):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(page: str, root: Path = ROOT) -> list[str]:
    """The relative links of ``page`` (a path under ``root``) that name a missing file or heading."""
    path = root / page
    bad = []
    for line in _prose(path.read_text()):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                bad.append(f"{target} (no file {file})")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
                bad.append(f"{target} (no heading with anchor #{anchor} in {dest.name})")
    return bad


def test_slug_follows_github():
    assert slug("Groups (`symkit.groups`)") == "groups-symkitgroups"
    assert slug("### Data efficiency (Figure 2.5)".lstrip("# ")) == "data-efficiency-figure-25"
    assert slug("Learning the anchor length-scale ω") == "learning-the-anchor-length-scale-ω"
    assert slug("The bilinear layer without W(x)") == "the-bilinear-layer-without-wx"
    assert anchors("# A\n## Cost\n```\n# Cost\n```\n### Cost\n") == {"a", "cost", "cost-1"}


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "b.md").write_text("# B\n\n## Where it is\n\n```\n[in code](nowhere.md)\n```\n")
    (tmp_path / "a.md").write_text("# A\n\n## Tasks\n\n[ok](b.md#where-it-is) [self](#tasks) `[code](x.md)`\n"
                                   "[bad](b.md#where-it-was) [missing](c.md) [bad self](#task)\n")
    assert broken_links("b.md", tmp_path) == []
    assert broken_links("a.md", tmp_path) == ["b.md#where-it-was (no heading with anchor #where-it-was in b.md)",
                                              "c.md (no file c.md)", "#task (no heading with anchor #task in a.md)"]


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_resolves(page):
    assert broken_links(page) == [], f"{page} has broken links"
