"""Reading a namespace's state back from Argo CD's REST API.

``GET /api/v1/applications/{name}?project=<project>`` (``Authorization: Bearer <token>``) answers with the
``v1alpha1.Application``; its ``status`` holds ``sync`` (status Synced / OutOfSync / Unknown, revision),
``health`` (Healthy / Progressing / Degraded / Suspended / Missing / Unknown, message),
``operationState`` (phase Running / Succeeded / Failed / Error / Terminating, message, startedAt,
finishedAt), ``conditions`` (type, message) and ``reconciledAt``. Errors come as grpc-gateway bodies
``{"error", "code", "message"}`` (code 5 not found, 7 permission denied, 16 unauthenticated). Since
CVE-2022-41354 a missing application is "permission denied" unless the request names its project;
with ``project`` it is a 404, so the client always names it.

``summarise`` turns what Argo CD says about a namespace's applications into one state for the
portal — and says why, with the operation's message and the conditions, not only two badges: an
application can sit in Progressing for ever. Unreachable Argo CD is a state of its own, never a
guess. Plain Python: no Django.
"""
from __future__ import annotations

import ssl
import urllib.parse
from dataclasses import dataclass, field

import httpx

from apps.core.http_errors import reason


class ArgoUnavailable(RuntimeError):
    """Argo CD could not be asked; the message says which address and why."""


class ArgoNotFound(LookupError):
    pass


@dataclass
class AppStatus:
    name: str
    sync: str = "Unknown"
    revision: str = ""
    health: str = "Unknown"
    health_message: str = ""
    operation: str = ""  # phase of the last operation
    operation_message: str = ""
    operation_finished: str = ""
    conditions: list = field(default_factory=list)  # [{"type", "message"}]
    reconciled_at: str = ""
    unhealthy: list = field(default_factory=list)  # [{"kind", "name", "health", "message"}] of resources not Healthy
    missing: bool = False  # Argo CD has no such application (not created yet, or pruned)

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def _object(value) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value) -> list:
    return value if isinstance(value, list) else []


def parse_application(body: dict, name: str = "") -> AppStatus:
    """The parts of an Application that say how it is doing (tolerant: missing parts stay Unknown)."""
    body = _object(body)
    metadata, status = _object(body.get("metadata")), _object(body.get("status"))
    sync, health, operation = _object(status.get("sync")), _object(status.get("health")), _object(status.get("operationState"))
    return AppStatus(
        name=metadata.get("name") or name, sync=sync.get("status") or "Unknown", revision=sync.get("revision") or "",
        health=health.get("status") or "Unknown", health_message=health.get("message") or "",
        operation=operation.get("phase") or "", operation_message=operation.get("message") or "",
        operation_finished=operation.get("finishedAt") or "",
        conditions=[{"type": c.get("type", ""), "message": c.get("message", "")} for c in _list(status.get("conditions"))
                    if isinstance(c, dict)],
        reconciled_at=status.get("reconciledAt") or "",
        unhealthy=[{"kind": r.get("kind", ""), "name": r.get("name", ""), "health": _object(r.get("health")).get("status", ""),
                    "message": _object(r.get("health")).get("message", "")}
                   for r in _list(status.get("resources"))
                   if isinstance(r, dict) and _object(r.get("health")).get("status") not in (None, "", "Healthy")])


def parse_error(body: dict) -> str:
    return str(body.get("message") or body.get("error") or body)


@dataclass
class Summary:
    state: str  # syncing, ready, degraded, failed
    message: str
    apps: list


def _resources(app: AppStatus, limit: int = 3) -> str:
    """The resources that make an application unhealthy, since Argo CD 3.x no longer explains the application's own health."""
    shown = [f"{r['kind']}/{r['name']} {r['health']}" + (f": {r['message']}" if r["message"] else "") for r in app.unhealthy[:limit]]
    more = len(app.unhealthy) - limit
    return (" — " + "; ".join(shown) + (f"; {more} more" if more > 0 else "")) if shown else ""


def summarise(apps: list[AppStatus]) -> Summary:
    """One state for the namespace from its applications (the tenant's own and one per blueprint)."""
    problems, waiting = [], []
    for app in apps:
        error_conditions = [c for c in app.conditions if c["type"].endswith("Error")]
        if app.operation in ("Failed", "Error"):
            problems.append(f"{app.name}: sync {app.operation.lower()}: {app.operation_message or 'no message'}")
        elif error_conditions:
            problems.append(f"{app.name}: {error_conditions[0]['type']}: {error_conditions[0]['message']}")
        elif app.health == "Degraded":
            problems.append(f"{app.name}: degraded" + (f": {app.health_message}" if app.health_message else "") + _resources(app))
        elif app.missing:
            waiting.append(f"{app.name}: not created by Argo CD yet")
        elif app.sync != "Synced" or app.health not in ("Healthy", "Suspended") or app.operation == "Running":
            detail = app.operation_message or app.health_message
            waiting.append(f"{app.name}: {app.sync}, {app.health}" + (f" ({detail})" if detail else "") + _resources(app))
    if problems:
        failed = any(app.operation in ("Failed", "Error") for app in apps)
        return Summary("failed" if failed else "degraded", "; ".join(problems), [a.as_dict() for a in apps])
    if waiting:
        return Summary("syncing", "; ".join(waiting), [a.as_dict() for a in apps])
    return Summary("ready", f"{len(apps)} application(s) synced and healthy", [a.as_dict() for a in apps])


SYNC_ORDER = ("Synced", "Unknown", "OutOfSync")
HEALTH_ORDER = ("Healthy", "Suspended", "Unknown", "Progressing", "Missing", "Degraded")


def worst(apps: list[AppStatus]) -> tuple[str, str]:
    """The namespace's sync and health: those of its worst application, so one failing service is not hidden
    behind a healthy tenant application."""
    def rank(value, order):
        return order.index(value) if value in order else order.index("Unknown")

    sync = max((app.sync for app in apps), key=lambda value: rank(value, SYNC_ORDER), default="Unknown")
    health = max(("Missing" if app.missing else app.health for app in apps), key=lambda value: rank(value, HEALTH_ORDER), default="Unknown")
    return sync, health


class ArgoClient:
    def __init__(self, url: str, token: str, *, verify: bool = True, timeout: float = 10.0):
        self.url, self.token, self.verify, self.timeout = url.rstrip("/"), token, verify, timeout

    def _get(self, path: str) -> dict:
        # The system's CA certificates, or none at all: a site's own choice for a private CA.
        verify = ssl.create_default_context() if self.verify else False
        try:
            response = httpx.get(f"{self.url}{path}", headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json"},
                                 verify=verify, timeout=self.timeout, follow_redirects=True)
        except httpx.HTTPError as exc:
            raise ArgoUnavailable(f"Argo CD at {self.url} is unreachable: {reason(exc)}") from exc
        try:
            body = response.json() if response.content else {}
        except ValueError as exc:
            if response.is_success:
                raise ArgoUnavailable(f"Argo CD at {self.url} is unreachable: {exc}") from exc
            body = {}
        if response.is_success:
            return body
        body = body if isinstance(body, dict) else {}
        code = response.status_code
        if code == 404 or body.get("code") == 5:
            raise ArgoNotFound(parse_error(body))
        if code == 403 or body.get("code") == 7:
            raise ArgoUnavailable(f"Argo CD at {self.url} refused: {parse_error(body)} (give the token a role that may get "
                                  f"applications of this project)")
        if code == 401 or body.get("code") == 16:
            raise ArgoUnavailable(f"Argo CD at {self.url} does not accept the token (ARGOCD_TOKEN): {parse_error(body)}")
        raise ArgoUnavailable(f"Argo CD at {self.url} answered {code}: {parse_error(body)}")

    def application(self, name: str, project: str) -> AppStatus:
        path = f"/api/v1/applications/{urllib.parse.quote(name, safe='')}?project={urllib.parse.quote(project, safe='')}"
        try:
            return parse_application(self._get(path), name)
        except ArgoNotFound:
            return AppStatus(name=name, missing=True)
