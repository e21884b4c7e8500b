"""Container health probe: GET a URL on the local gunicorn; exit 0 on HTTP 200, 1 otherwise.

Used by the Dockerfile's HEALTHCHECK and by docker-compose.yml (python:3.11-slim has no curl).

A bare ``GET http://127.0.0.1:8000/healthz`` does not work against the production profile:
SECURE_SSL_REDIRECT answers plain HTTP with a 301 to https://, and a Host header that is not in
ALLOWED_HOSTS gets a 400. So the probe presents itself the way nginx does: Host = the first usable
entry of ALLOWED_HOSTS and ``X-Forwarded-Proto: https`` (trusted through SECURE_PROXY_SSL_HEADER).
Redirects are never followed: a 3xx means the probe or the settings are wrong, and following it
to https://127.0.0.1 would only produce a confusing TLS error instead.

Usage: python deploy/healthcheck.py [URL]   (default http://127.0.0.1:8000/healthz)
"""

import os
import sys
import urllib.error
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8000/healthz"
TIMEOUT_SECONDS = 4  # below the 5 s HEALTHCHECK --timeout, so we report instead of being killed


def probe_host(allowed_hosts: str) -> str:
    """A Host header value that Django's ALLOWED_HOSTS check accepts."""
    for entry in allowed_hosts.split(","):
        entry = entry.strip()
        if not entry or entry == "*":
            continue
        # ".example.org" allows example.org itself and every subdomain.
        return entry.lstrip(".") or "localhost"
    # Unset, empty or "*": localhost is in the default list and matches "*".
    return "localhost"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises HTTPError with the 3xx status


def check(url: str, allowed_hosts: str) -> tuple[bool, str]:
    headers = {
        "Host": probe_host(allowed_hosts),
        "X-Forwarded-Proto": "https",
        "User-Agent": "belvedere-healthcheck",
    }
    request = urllib.request.Request(url, headers=headers)
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=TIMEOUT_SECONDS) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
        if 300 <= status < 400:
            return False, f"{url} redirected ({status}) to {exc.headers.get('Location')}: check SECURE_PROXY_SSL_HEADER"
    except OSError as exc:  # connection refused, timeout, DNS
        return False, f"{url} unreachable: {exc}"
    if status != 200:
        return False, f"{url} answered {status}"
    return True, f"{url} answered 200"


def main(argv: list[str]) -> int:
    url = argv[1] if len(argv) > 1 else DEFAULT_URL
    healthy, message = check(url, os.environ.get("ALLOWED_HOSTS", ""))
    # Docker keeps this line in `docker inspect` (State.Health.Log).
    print(("healthy: " if healthy else "unhealthy: ") + message)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
