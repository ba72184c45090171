"""Every relative link and image in README.md and docs/*.md points to a file that exists, and every
#anchor to a heading of that file (GitHub's heading ids)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The page without fenced code blocks and inline code (links there are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def heading_ids(text: str) -> set[str]:
    """GitHub's ids of a page's headings: lower case, punctuation dropped, spaces to hyphens, -1 on repeats."""
    ids: set[str] = set()
    for title in re.findall(r"^#{1,6} +(.+?) *#*$", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M), re.M):
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")
        unique, n = slug, 0
        while unique in ids:
            n += 1
            unique = f"{slug}-{n}"
        ids.add(unique)
    return ids


def links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text(encoding="utf-8"))) if not re.match(r"[a-z]+:", t)]


def test_the_pages_exist_and_link_to_each_other():
    assert (ROOT / "docs" / "architecture.md") in PAGES
    readme_links = {Path(t.partition("#")[0]).as_posix() for t in links(ROOT / "README.md")}
    for page in PAGES[1:]:  # every page of docs/ is reached from the README
        assert f"docs/{page.name}" in readme_links, page.name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page: Path):
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.name}: {target} (no such file)"
        if anchor:
            assert file.suffix == ".md", f"{page.name}: {target} (an anchor into a file that is not a page)"
            assert anchor in heading_ids(file.read_text(encoding="utf-8")), f"{page.name}: {target} (no such heading)"


def test_heading_ids_follow_github():
    text = ("# The app\n## Credit per action (TASPO)\n## Where raw history: the `learner`\n"
            "```\n# not a heading\n```\n## The app")
    assert heading_ids(text) == {"the-app", "credit-per-action-taspo", "where-raw-history-the-learner", "the-app-1"}
