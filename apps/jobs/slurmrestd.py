"""A small client for slurmrestd, Slurm's REST daemon: the jobs documents a sync needs.

Pure: must not import django. HTTP with httpx.

``SlurmRestClient(url)`` talks HTTP/1.1 to ``http://host:port``, ``https://host:port`` (the
system's CA certificates; a path after the port is kept as a prefix, for a reverse proxy) or a
Unix socket, ``unix:///run/slurmrestd/slurmrestd.socket`` (what ``slurmrestd unix:/path``
listens on; with ``rest_auth/local`` it trusts the uid of the connecting process). With
``rest_auth/jwt`` every request carries ``X-SLURM-USER-NAME`` and ``X-SLURM-USER-TOKEN`` (a JWT,
e.g. from ``scontrol token username=belvedere lifespan=...``).

* :meth:`SlurmRestClient.jobs` — ``GET /slurm/<version>/jobs``: the controller's jobs, the same
  ``{"meta", "errors", "jobs": [...]}`` document as ``squeue --json``.
* :meth:`SlurmRestClient.db_jobs` — ``GET /slurmdb/<version>/jobs?start_time=...``: jobs from
  accounting, the same document as ``sacct --json``.

Every failure raises :class:`SlurmRestError` with one line that says what went wrong and where
(the URL without any user:password part). The token never appears in a message.

Things learnt from Slurm 22.05.8's slurmrestd (``openapi/v0.0.38`` and ``openapi/dbv0.0.38``):

* ``start_time`` of ``/slurmdb/v0.0.38/jobs`` goes through Slurm's ``parse_time``: epoch seconds
  are refused (HTTP 500, "Unable to parse time format"), ``YYYY-MM-DDTHH:MM:SS`` is read in
  slurmrestd's local time zone, and an unescaped ``:`` in the query is refused with HTTP 400
  ("Unable to parse query."). The client sends ``now-<seconds>``, which ``parse_time`` reads the
  same on every version and in every time zone.
* Without slurmdbd (``AccountingStorageType=accounting_storage/none``) the ``openapi/dbv0.0.38``
  plugin refuses to load ("slurm not configured with slurmdbd") and slurmrestd exits, so such a
  site runs ``slurmrestd -s openapi/v0.0.38``; every ``/slurmdb/`` path then answers
  HTTP 404 "Unable find requested URL" (:attr:`SlurmRestError.status` is 404).
* An accounting query that matches no job answers HTTP 200 with no jobs and the error
  ``{"error_number": 9003, "error": "Nothing found with query"}`` where ``sacct --json`` says
  nothing; :meth:`db_jobs` drops that error so that a quiet cluster is not reported every sync.
* Errors come as HTTP 500 with ``{"errors": [{"description", "error", "error_number",
  "source"}]}``; the message quotes the first one.
"""
from __future__ import annotations

import json
import math
import re
import socket
import ssl
from datetime import datetime, timezone
from urllib.parse import quote, urlencode, urlsplit

import httpx

from apps.core.http_errors import root_cause

__all__ = ["SlurmRestClient", "SlurmRestError"]

NOTHING_FOUND = 9003  # slurmdbd's "Nothing found with query" (ESLURM_REST_EMPTY_RESULT)
_VERSION = re.compile(r"v\d+\.\d+\.\d+")
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]+")


class SlurmRestError(RuntimeError):
    """slurmrestd could not be reached or did not give a usable answer.

    ``status`` is the HTTP status when there was an answer (None otherwise)."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


def _one_line(text: str, limit: int = 200) -> str:
    text = _UNPRINTABLE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


class SlurmRestClient:
    """A client for one slurmrestd. See the module's docstring.

    ``user_name``/``token``: sent as ``X-SLURM-USER-NAME``/``X-SLURM-USER-TOKEN`` when given
    (``rest_auth/jwt``); leave them out for ``rest_auth/local`` on a Unix socket.
    ``api_version``: the OpenAPI plugin version in the paths (``v0.0.38`` for Slurm 22.05).
    ``timeout``: seconds for connecting and for each read.
    """

    def __init__(self, url: str, *, user_name: str | None = None, token: str | None = None,
                 api_version: str = "v0.0.38", timeout: float = 30):
        self.url = (url or "").strip()
        self.user_name = user_name or None
        self._token = token or None
        self.timeout = float(timeout)
        if not _VERSION.fullmatch(api_version or ""):
            raise SlurmRestError(f"slurmrestd API version {api_version!r}: expected e.g. v0.0.38")
        self.api_version = api_version
        try:
            parts = urlsplit(self.url)
            port = parts.port
        except ValueError as exc:
            raise SlurmRestError(f"slurmrestd URL {self._display_url(self.url)!r}: {exc}") from None
        self.scheme = parts.scheme.lower()
        if self.scheme == "unix":
            if parts.netloc or not parts.path.startswith("/"):
                raise SlurmRestError(f"slurmrestd URL {self.url!r}: a Unix socket URL is unix:///absolute/path")
            self.socket_path, self.host, self.port, self.prefix = parts.path, "", None, ""
        elif self.scheme in ("http", "https"):
            if not parts.hostname:
                raise SlurmRestError(f"slurmrestd URL {self._display_url(self.url)!r}: no host")
            self.socket_path, self.host, self.port = "", parts.hostname, port
            self.prefix = parts.path.rstrip("/")
        else:
            raise SlurmRestError(f"slurmrestd URL {self._display_url(self.url)!r}: use http://host:port, "
                                 "https://host:port or unix:///path/to/socket")
        self.where = self._display_url(self.url)

    @staticmethod
    def _display_url(url: str) -> str:
        """The URL without a user:password part."""
        return re.sub(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@]*@", r"\1", url)

    def __repr__(self) -> str:
        return f"SlurmRestClient({self.where!r}, api_version={self.api_version!r})"

    # -----------------------------------------------------------------------------------------
    # Endpoints
    # -----------------------------------------------------------------------------------------
    def jobs(self) -> str:
        """``GET /slurm/<version>/jobs``: the controller's jobs (the ``squeue --json`` document)."""
        return self.get(f"/slurm/{self.api_version}/jobs")

    def db_jobs(self, start_time: datetime) -> str:
        """``GET /slurmdb/<version>/jobs``: jobs from accounting since ``start_time`` (the
        ``sacct --json`` document). A naive ``start_time`` is taken as UTC."""
        if start_time.tzinfo is None:
            start_time = start_time.replace(tzinfo=timezone.utc)
        seconds = max(0, math.ceil((datetime.now(timezone.utc) - start_time).total_seconds()))
        body = self.get(f"/slurmdb/{self.api_version}/jobs", {"start_time": f"now-{seconds}"})
        return self._drop_nothing_found(body)

    @staticmethod
    def _drop_nothing_found(body: str) -> str:
        if len(body) > 65536 or str(NOTHING_FOUND) not in body:
            return body  # a big answer has jobs; only an empty one carries the error alone
        try:
            document = json.loads(body)
        except ValueError:
            return body
        errors = document.get("errors") if isinstance(document, dict) else None
        if not document.get("jobs") and errors and all(
            isinstance(error, dict) and error.get("error_number") == NOTHING_FOUND for error in errors
        ):
            document["errors"] = []
            return json.dumps(document)
        return body

    # -----------------------------------------------------------------------------------------
    # HTTP
    # -----------------------------------------------------------------------------------------
    def _client(self) -> httpx.Client:
        """One connection's client: the Unix socket, or the host with the system's CA certificates
        for https. Proxies from the environment are not used: slurmrestd is on the site's network."""
        if self.scheme == "unix":
            return httpx.Client(transport=httpx.HTTPTransport(uds=self.socket_path), base_url="http://localhost",
                                timeout=self.timeout, trust_env=False)
        host = f"[{self.host}]" if ":" in self.host else self.host
        verify = ssl.create_default_context() if self.scheme == "https" else False
        return httpx.Client(base_url=f"{self.scheme}://{host}" + (f":{self.port}" if self.port else ""),
                            verify=verify, timeout=self.timeout, trust_env=False)

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "belvedere-slurmrestd-client"}
        if self.user_name:
            headers["X-SLURM-USER-NAME"] = self.user_name
        if self._token:
            headers["X-SLURM-USER-TOKEN"] = self._token
        return headers

    def _scrub(self, text: str) -> str:
        if self._token and self._token in text:
            text = text.replace(self._token, "<token>")
        return text

    def _fail(self, path: str, what: str, status: int | None = None) -> SlurmRestError:
        return SlurmRestError(self._scrub(f"slurmrestd {self.where}: GET {path}: {what}"), status=status)

    def get(self, path: str, query: dict[str, str] | None = None) -> str:
        """GET ``path`` (below the URL's prefix); the body of a 200 answer that looks like JSON."""
        target = self.prefix + quote(path)
        if query:
            target += "?" + urlencode(query)  # quotes ":" and "+", which 22.05 refuses unescaped
        try:
            with self._client() as client:
                response = client.get(target, headers=self._headers())
        except httpx.TimeoutException:
            raise self._fail(path, f"no answer within {self.timeout:g} s") from None
        except (httpx.ProtocolError, httpx.DecodingError) as exc:
            raise self._fail(path, f"not a valid HTTP answer ({exc.__class__.__name__}: "
                                   f"{_one_line(str(exc)) or 'no detail'})") from None
        except httpx.TransportError as exc:
            raise self._fail(path, self._unreachable(root_cause(exc))) from None
        status, reason = response.status_code, response.reason_phrase
        content_type = response.headers.get("Content-Type", "")
        raw = response.content
        body = raw.decode("utf-8", errors="replace")
        if status != 200:
            raise self._fail(path, f"HTTP {status} {reason}".rstrip() + f": {self._detail(body)}", status=status)
        if not body.lstrip().startswith("{"):
            raise self._fail(path, f"the answer is not JSON (Content-Type {content_type or 'none'}): "
                                   f"{self._detail(body)}", status=status)
        return body

    def _unreachable(self, cause: BaseException) -> str:
        """Why the request did not reach slurmrestd, from the error under httpx's."""
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused (is slurmrestd running and listening there?)"
        if isinstance(cause, FileNotFoundError):
            return f"no socket at {self.socket_path}"
        if isinstance(cause, PermissionError):
            return f"permission denied on {self.socket_path}" if self.socket_path else "permission denied"
        if isinstance(cause, socket.gaierror):
            return f"cannot resolve host {self.host!r} ({cause.strerror or cause})"
        if isinstance(cause, ssl.SSLError):
            return f"TLS error: {_one_line(cause.reason or str(cause))}"
        if isinstance(cause, OSError):
            return _one_line(cause.strerror or str(cause)) or cause.__class__.__name__
        return _one_line(str(cause)) or cause.__class__.__name__

    @staticmethod
    def _detail(body: str) -> str:
        """Slurm's first error from a JSON error document, else the body's first non-empty line."""
        if body.lstrip().startswith("{") and len(body) < 1_000_000:
            try:
                document = json.loads(body)
            except ValueError:
                document = None
            errors = document.get("errors") if isinstance(document, dict) else None
            if isinstance(errors, list) and errors and isinstance(errors[0], dict):
                first = errors[0]
                text = ": ".join(dict.fromkeys(str(first[key]) for key in ("description", "error") if first.get(key)))
                if text:
                    return _one_line(text + (f" (source {first['source']})" if first.get("source") else ""))
        for line in body.splitlines():
            if line.strip():
                return _one_line(line)
        return "empty body"
