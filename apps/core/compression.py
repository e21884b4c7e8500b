"""Gzip for the portal's own answers (HTML pages, JSON, CSV), in every profile.

Static files never reach this middleware: whitenoise answers them first (it sits above it in
``MIDDLEWARE``) and sends its precompressed ``.br``/``.gz`` copies to browsers that accept them.

BREACH (compression + a secret in the body + attacker-chosen text in the same body): Django's
CSRF token is masked afresh for every response, so the secret never repeats from one answer to the
next; Django's gzip also pads each answer with up to 100 random bytes (``max_random_bytes``), so
lengths do not leak what matched. Session cookies and API tokens travel in headers, which are not
compressed here.
"""
from django.middleware.gzip import GZipMiddleware

# Answers left as they are: a server-sent event stream must reach the browser event by event, but
# gzip holds output back until it has a block to write; the others are compressed already.
LEFT_UNCOMPRESSED = frozenset({
    "text/event-stream",
    "application/vnd.apache.parquet",
    "application/zip", "application/gzip", "application/x-gzip", "application/zstd",
    "image/png", "image/jpeg", "image/webp", "font/woff2",
})


def media_type(response) -> str:
    return response.get("Content-Type", "").split(";", 1)[0].strip().lower()


class PortalGZipMiddleware(GZipMiddleware):
    """Django's GZipMiddleware, except for the media types above and partial content (a 206 body is
    a byte range of the uncompressed answer; compressing it would break what Content-Range says)."""

    def process_response(self, request, response):
        if response.status_code == 206 or media_type(response) in LEFT_UNCOMPRESSED:
            return response
        return super().process_response(request, response)
