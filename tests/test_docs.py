"""The tree speaks of the product: no development-history wording, no path outside the
repository, and every relative link of the README and docs/ resolves (file and heading)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = {".py", ".md", ".sql", ".txt", ".toml", ".yml", ".yaml", ".sh", ".cfg", ".ini"}

# Wording that narrates how the code came to be rather than what it does.
HISTORY = [re.compile(p, re.I) for p in (
    r"\bstop \d+\b",
    r"\bissues? \d+\b",
    r"\bissue's\b",
    r"\brough edge \d+\b",
    r"\bthe session after (that|this)\b",
    r"\bbefore this (change|session|stop|round)\b",
    r"\bprevious round\b",
    r"\bthe code before\b",
    r"\b(commit|before|after) \(?[0-9a-f]{7,40}\b",
)]

def tree() -> list[Path]:
    """The repository's own files: hidden directories (.git, virtualenvs), build metadata and
    caches are not part of it."""
    def ours(path: Path) -> bool:
        parts = path.relative_to(ROOT).parts
        return not any(p.startswith(".") or p.endswith(".egg-info") or p in ("__pycache__", "build", "dist")
                       for p in parts)
    return sorted(p for p in ROOT.rglob("*") if (p.suffix in SCANNED or p.name == "Dockerfile") and p.is_file()
                  and ours(p))


def test_no_development_history_wording():
    this = Path(__file__).resolve()
    found = []
    for path in tree():
        name = path.relative_to(ROOT).as_posix()
        if path == this:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if any(p.search(line) for p in HISTORY):
                found.append(f"{name}:{n}: {line.strip()[:120]}")
    assert not found, "development history belongs in git, not in the tree:\n" + "\n".join(found)


def test_the_scan_sees_the_tree():
    names = {p.relative_to(ROOT).as_posix() for p in tree()}
    assert {"README.md", "pyproject.toml", "agent_memory/api/client.py", "docs/security.md", "docker-compose.yml",
            "Dockerfile"} <= names
    assert not any(n.startswith(".venv/") for n in names)


# Strings that name a path outside on purpose, as hostile input.
HOSTILE = {"tests/cli/test_fuzz.py": "a path traversal fed to the CLI, which must refuse it"}


def _escapes(reference: str) -> bool:
    """A path in text is read from the repository's root, where commands run; relative links of
    the docs are checked against their own file by the link test."""
    return not (ROOT / reference).resolve().is_relative_to(ROOT.resolve())


def test_nothing_refers_to_a_path_outside_the_repository():
    parent_ref = re.compile(r"(?<![\w./(])((?:\.\./)+[\w.-]+)")
    found = []
    for path in tree():
        name = path.relative_to(ROOT).as_posix()
        if path == Path(__file__).resolve() or name in HOSTILE:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for ref in parent_ref.findall(line):
                if _escapes(ref):
                    found.append(f"{name}:{n}: {ref}")
    assert not found, "paths outside the repository (take them as an argument instead):\n" + "\n".join(found)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_relative_link_of_the_docs_resolves():
    broken = []
    for path in documents():
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not ours to check here
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists() or not linked.is_relative_to(ROOT):
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_docs_folder_has_its_pages_and_the_readme_is_short():
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert {"architecture.md", "api.md", "operations.md", "security.md", "lifecycle.md", "recall.md",
            "evaluation.md", "performance.md", "testing.md"} <= pages
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    assert all(f"docs/{page}" in readme for page in pages)  # the README links every page
