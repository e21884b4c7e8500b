"""A typical request, the site inventory, a context in which nothing is taken yet, teams with people, and a
local server that answers like Argo CD."""
import json
import threading
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from apps.namespaces.inventory import load_inventory
from apps.namespaces.spec import Usage

TODAY = date(2026, 11, 23)


@pytest.fixture(scope="session")
def inventory():
    return load_inventory()


def typical() -> dict:
    return {"team": "a-llm01", "name": "mlflow", "environment": "dev", "purpose": "Experiment tracking for the 70B sweeps",
            "contacts": ["jane.doe@example.org"], "expires": "2027-06-30", "psa": "restricted",
            "quota": {"cpu": {"requests": "8", "limits": "16"}, "memory": {"requests": "32Gi", "limits": "64Gi"},
                      "gpus": [{"model": "h100", "profile": "1g.10gb", "count": 2}],
                      "storage": {"longhorn": {"size": "100Gi", "pvcs": 10}}},
            "hostnames": ["a-llm01-mlflow.svc.alps.example.org"],
            "blueprints": [{"id": "mlflow", "params": {"hostname": "a-llm01-mlflow.svc.alps.example.org", "storage": "50Gi"}}]}


def context(inventory, **overrides) -> dict:
    return {"inventory": inventory, "team_members": True, "existing": {"names": {}, "hostnames": {}}, "allocated": Usage(),
            "team_usage": Usage(), "envelope": inventory.default_envelope, "today": TODAY, **overrides}


# ---------------------------------------------------------------------------------------------
# A local HTTP server answering like Argo CD's API, with the real-format bodies of data/argocd/
# ---------------------------------------------------------------------------------------------

ARGO_DATA = Path(__file__).with_name("data") / "argocd"
ARGO_TOKEN = "eyJhbGciOiJIUzI1NiJ9.test-token"


def argo_body(file_name: str, name: str | None = None) -> dict:
    """A real-format Argo CD answer; ``name`` renames the application in it."""
    body = json.loads((ARGO_DATA / file_name).read_text())
    if name and "metadata" in body:
        body["metadata"]["name"] = name
    return body


class ArgoServer:
    """``apps``: application name -> the JSON body to answer (absent: not found). ``seen``: the requests."""

    def __init__(self):
        self.apps: dict[str, object] = {}
        self.seen: list = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, payload):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 - http.server's name
                url = urlsplit(self.path)
                query = parse_qs(url.query)
                server.seen.append((url.path, query, self.headers.get("Authorization")))
                if self.headers.get("Authorization") != f"Bearer {ARGO_TOKEN}":
                    message = "invalid session: token signature is invalid"
                    self._send(401, {"error": message, "code": 16, "message": message})
                    return
                name = unquote(url.path.rsplit("/", 1)[-1])
                if name in server.apps:
                    self._send(200, server.apps[name])
                elif query.get("project"):
                    self._send(404, argo_body("argocd-error-not-found-with-project.json"))
                else:
                    self._send(403, argo_body("argocd-error-not-found.json"))

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def close(self):
        self._http.shutdown()
        self._http.server_close()


@pytest.fixture
def argo_server():
    server = ArgoServer()
    yield server
    server.close()


# ---------------------------------------------------------------------------------------------
# Teams, people and a fresh GitOps repository
# ---------------------------------------------------------------------------------------------
DIRECTORY = "tenants/a-llm01/namespaces/a-llm01-mlflow"


def request_spec(**changes) -> dict:
    """The typical request, reviewed half a year from the day the test runs."""
    from datetime import timedelta

    from django.utils import timezone

    return {**typical(), "expires": (timezone.now().date() + timedelta(days=180)).isoformat(), **changes}


@pytest.fixture
def world(db, make_user, settings, tmp_path):
    """alice and mia in a-llm01 (its envelope names lena as approver), bob in b-moe02, staff lena and sam;
    a GitOps repository of this test's own; no Argo CD."""
    from apps.accounts.models import Project
    from apps.namespaces.models import TeamEnvelope

    settings.NAMESPACES_GIT_PATH = str(tmp_path / "gitops")
    settings.NAMESPACES_GIT_REMOTE = ""
    settings.ARGOCD_URL = ""
    people = {"alice": make_user("alice", accounts=["a-llm01"]), "mia": make_user("mia", accounts=["a-llm01"]),
              "bob": make_user("bob", accounts=["b-moe02"]), "lena": make_user("lena", is_staff=True),
              "sam": make_user("sam", is_staff=True)}
    envelope = TeamEnvelope.objects.create(project=Project.objects.get(slurm_account="a-llm01"))
    envelope.approvers.add(people["lena"])
    return people
