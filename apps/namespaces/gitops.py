"""The GitOps repository the namespaces live in, through the ``git`` command.

Layout (one directory per namespace, read by the platform's Argo CD ApplicationSet):

    tenants/<team>/namespaces/<namespace>/request.yaml      the request as data (id, who, spec)
    tenants/<team>/namespaces/<namespace>/00-namespace.yaml … 50-application-<blueprint>.yaml

Writing a namespace's directory commits only when a file changed, so submitting the same request
again makes no commit; removing it is one commit. With a remote (``NAMESPACES_GIT_REMOTE``) every
commit is pushed, after rebasing on what others pushed. The embedded default is a local repository
the portal creates under its data directory.

Plain Python: no Django.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


class GitError(RuntimeError):
    pass


@dataclass
class Commit:
    sha: str
    message: str
    author: str
    date: str


class GitOpsRepo:
    def __init__(self, path: str | Path, *, remote: str = "", branch: str = "main", author: str = "Belvedere",
                 email: str = "belvedere@localhost", timeout: float = 60.0):
        self.path, self.remote, self.branch = Path(path), remote, branch
        self.author, self.email, self.timeout = author, email, timeout

    # -- plumbing -------------------------------------------------------------------------------
    def _git(self, *args: str, check: bool = True) -> str:
        if shutil.which("git") is None:
            raise GitError("the git command is not installed; install git (the GitOps repository needs it)")
        env = {**os.environ, "GIT_AUTHOR_NAME": self.author, "GIT_AUTHOR_EMAIL": self.email, "GIT_COMMITTER_NAME": self.author,
               "GIT_COMMITTER_EMAIL": self.email, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
        try:
            done = subprocess.run(["git", "-C", str(self.path), *args], capture_output=True, text=True, timeout=self.timeout, env=env)
        except subprocess.TimeoutExpired:
            raise GitError(f"git {args[0]} did not finish within {self.timeout:g} s") from None
        if check and done.returncode != 0:
            raise GitError(f"git {' '.join(args[:2])} failed: {(done.stderr or done.stdout).strip()[-500:]}")
        return done.stdout

    def ensure(self) -> None:
        """Create (or clone) the repository when it is not there yet."""
        if (self.path / ".git").exists():
            return
        self.path.mkdir(parents=True, exist_ok=True)
        if self.remote:
            shutil.rmtree(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(["git", "clone", "--branch", self.branch, self.remote, str(self.path)], capture_output=True, text=True,
                                  timeout=self.timeout, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
            if done.returncode != 0:
                raise GitError(f"cannot clone the GitOps repository: {done.stderr.strip()[-300:]}")
            return
        self._git("init", "--quiet", "--initial-branch", self.branch)
        (self.path / "README.md").write_text(
            "# Service-plane tenants\n\nWritten by Belvedere: one directory per namespace under `tenants/<team>/namespaces/`.\n"
            "Do not edit by hand; change a namespace through its page in Belvedere.\n")
        self._git("add", "README.md")
        self._git("commit", "--quiet", "-m", "Start the tenants repository")

    def head(self) -> str:
        return self._git("rev-parse", "HEAD").strip()

    def _commit(self, message: str) -> str | None:
        if not self._git("status", "--porcelain").strip():
            return None
        self._git("add", "-A")
        self._git("commit", "--quiet", "-m", message)
        sha = self.head()
        if self.remote:
            self._git("pull", "--quiet", "--rebase", "origin", self.branch)
            self._git("push", "--quiet", "origin", f"HEAD:{self.branch}")
            sha = self.head()
        return sha

    # -- namespaces -----------------------------------------------------------------------------
    @staticmethod
    def directory(team: str, namespace: str) -> str:
        return f"tenants/{team}/namespaces/{namespace}"

    def write(self, directory: str, files: dict[str, str], message: str) -> str | None:
        """Make ``directory`` hold exactly ``files``; commit if anything changed. Returns the commit or None."""
        self.ensure()
        target = self.path / directory
        target.mkdir(parents=True, exist_ok=True)
        for stale in target.iterdir():
            if stale.is_file() and stale.name not in files:
                stale.unlink()
        for name, text in files.items():
            if "/" in name or name.startswith("."):
                raise GitError(f"refusing to write {name!r} outside the namespace's directory")
            path = target / name
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
        return self._commit(message)

    def remove(self, directory: str, message: str) -> str | None:
        self.ensure()
        target = self.path / directory
        if not target.exists():
            return None
        shutil.rmtree(target)
        return self._commit(message)

    def read(self, directory: str) -> dict[str, str]:
        target = self.path / directory
        if not target.is_dir():
            return {}
        return {path.name: path.read_text() for path in sorted(target.iterdir()) if path.is_file()}

    def diff(self, directory: str, files: dict[str, str]) -> str:
        """What writing ``files`` would change, as a unified diff against the committed directory."""
        import difflib

        current = self.read(directory) if (self.path / ".git").exists() else {}
        out = []
        for name in sorted(set(current) | set(files)):
            before, after = current.get(name, ""), files.get(name, "")
            if before != after:
                out.extend(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                                fromfile=f"a/{directory}/{name}" if name in current else "/dev/null",
                                                tofile=f"b/{directory}/{name}" if name in files else "/dev/null"))
        return "".join(out)

    def show(self, sha: str, directory: str) -> str:
        """The diff a commit made in ``directory``."""
        return self._git("show", "--format=", sha, "--", directory)

    def log(self, directory: str, limit: int = 50) -> list[Commit]:
        self.ensure()
        text = self._git("log", f"-{limit}", "--format=%H%x1f%s%x1f%an%x1f%cI%x1e", "--", directory)
        commits = []
        for record in text.split("\x1e"):
            fields = record.strip().split("\x1f")
            if len(fields) == 4:
                commits.append(Commit(*fields))
        return commits
