"""The business code a checkout had: what verify's zero-intrusion proof compares against.

By default that is the manifest's record, made by the last apply for every file it
analysed ("business code as of the last apply"). `verify --baseline` takes a
folder (a pristine tree) or a git ref of the checkout's repository (`v0.9.1`,
`upstream/main`), read without touching the work tree.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from trace_instrument.engine.analysis import FileProblem, FileWork, analyse
from trace_instrument.engine.files import CheckoutError, checkout_root
from trace_instrument.engine.manifest import MODULE_SCOPE, Business, Manifest
from trace_instrument.locate.business import business_fingerprints
from trace_instrument.locate.match import canonical
from trace_instrument.locate.recognize import Recognition
from trace_instrument.model import Catalog


def added_imports(catalog: Catalog) -> frozenset[str]:
    """Canonical forms of the plain imports catalog points add (instrumentation, not business)."""
    return frozenset(canonical(ast.parse(text).body[0]) for p in catalog.points for text in p.imports)


def business_baseline(work: FileWork, catalog: Catalog) -> tuple[str, ...]:
    """Fingerprints of a file's business code, for verify's zero-intrusion proof."""
    return tuple(f for f, _ in business_fingerprints(work.locator.recognition, added_imports(catalog)))


def business_record(recognition: Recognition, tree: ast.Module, catalog: Catalog) -> Business:
    """A file's business code as the manifest records it: its digest, each statement's mark and,
    for a reviewer, the def or class each statement is in."""
    return recorded_business(business_fingerprints(recognition, added_imports(catalog)), tree)


def recorded_business(found: list[tuple[str, int]], tree: ast.Module) -> Business:
    """The record of business statements found as (fingerprint, line) in the file `tree` parses."""
    names = scope_names(tree)
    return Business.of([f for f, _ in found], [names.get(line, MODULE_SCOPE) for _, line in found])


def scope_names(tree: ast.Module) -> dict[int, str]:
    """The name of the innermost def or class each line is in (its own header line included)."""
    names: dict[int, str] = {}
    for node in ast.walk(tree):  # outer definitions come first: inner ones overwrite their lines
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.update(dict.fromkeys(range(node.lineno, (node.end_lineno or node.lineno) + 1), node.name))
    return names


class Baseline:
    """Business code per file, from wherever the proof should start."""

    def business(self, relative: str, catalog: Catalog) -> Business | None:
        raise NotImplementedError

    @property
    def description(self) -> str:
        raise NotImplementedError

    @property
    def accepting(self) -> str:
        """How the fork makes its own business edits the baseline ("": they cannot be)."""
        return ""


class ManifestBaseline(Baseline):
    def __init__(self, manifest: Manifest):
        self.manifest = manifest

    def business(self, relative: str, catalog: Catalog) -> Business | None:
        return self.manifest.baselines.get(relative)

    @property
    def description(self) -> str:
        return "the last apply (the manifest)"

    @property
    def accepting(self) -> str:
        return "a business edit of the fork's own after apply? `apply` records the business code as it now is"


class FolderBaseline(Baseline):
    def __init__(self, root: Path):
        self.root = root

    def business(self, relative: str, catalog: Catalog) -> Business | None:
        work = analyse(self.root, relative, catalog)
        return None if isinstance(work, FileProblem) else _whole(business_baseline(work, catalog))

    @property
    def description(self) -> str:
        return f"the tree at {self.root}"


class GitBaseline(Baseline):
    """Files as a commit of the checkout's git repository has them."""

    def __init__(self, checkout: Path, ref: str):
        self.checkout = checkout
        self.ref = ref
        self.top = Path(_git(checkout, "rev-parse", "--show-toplevel").strip())
        self.commit = _git(checkout, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
        self.prefix = checkout.resolve().relative_to(self.top.resolve()).as_posix()

    def business(self, relative: str, catalog: Catalog) -> Business | None:
        path = f"{self.prefix}/{relative}" if self.prefix not in ("", ".") else relative
        try:
            data = subprocess.run(
                ["git", "-C", str(self.top), "cat-file", "blob", f"{self.commit}:{path}"],
                check=True,
                capture_output=True,
                timeout=60,
            ).stdout
        except subprocess.CalledProcessError:
            return None  # not in that commit
        work = analyse(self.checkout, relative, catalog, data)
        return None if isinstance(work, FileProblem) else _whole(business_baseline(work, catalog))

    @property
    def description(self) -> str:
        return f"git {self.ref} ({self.commit[:12]})"


def _whole(fingerprints: tuple[str, ...]) -> Business:
    """A record that keeps each fingerprint whole (a tree at hand: no need to save space)."""
    return Business.of(fingerprints, whole=True)


def baseline_from(option: str | Path | None, checkout: Path, manifest: Manifest) -> Baseline:
    """The baseline `verify --baseline OPTION` means: none (the manifest), a folder, or a git ref."""
    if option is None:
        return ManifestBaseline(manifest)
    as_path = Path(option)
    if as_path.is_dir():
        return FolderBaseline(checkout_root(as_path))
    try:
        return GitBaseline(checkout, str(option))
    except (subprocess.CalledProcessError, OSError, ValueError) as exc:
        detail = exc.stderr.strip() if isinstance(exc, subprocess.CalledProcessError) and exc.stderr else ""
        raise CheckoutError(
            f"--baseline {option}: neither a folder nor a commit of the checkout's git repository"
            + (f" ({detail})" if detail else "")
        ) from None


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True, timeout=60).stdout
