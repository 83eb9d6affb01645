"""Every relative link and image of README.md and docs/ points at a file that exists, and every
``#anchor`` into a markdown page at one of its headings (GitHub's heading slugs)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _links(page: Path):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold no links
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_relative_links_and_anchors_resolve():
    broken = []
    for page in PAGES:
        for link in _links(page):
            if re.match(r"^[a-z]+:", link):
                continue
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            if not target.exists():
                broken.append(f"{page.relative_to(ROOT)}: {link} (no such file)")
            elif anchor and target.suffix == ".md":
                headings = {_slug(h) for h in re.findall(r"^#+\s+(.*)$", target.read_text(), flags=re.M)}
                if anchor not in headings:
                    broken.append(f"{page.relative_to(ROOT)}: {link} (no such heading)")
    assert not broken, "\n".join(broken)
