from django.conf import settings
from django.urls import reverse

from .demo_progress import BUILDING, READY, read_progress
from .navigation import navigation_for


def navigation(request):
    """Navigation entries the user may see, with the current section marked."""
    path = request.path
    items = []
    # Error pages may render before the authentication middleware ran (e.g. a disallowed Host).
    for item in navigation_for(getattr(request, "user", None)):
        url = reverse(item.url_name)
        items.append({"key": item.key, "label": item.label, "url": url, "current": path.startswith(url)})
    return {
        "nav_items": items,
        "belvedere_profile": settings.BELVEDERE_PROFILE,
        "oidc_enabled": settings.OIDC_ENABLED,
        "oidc_provider_name": settings.OIDC_PROVIDER_NAME,
    }


def demo_build(request):
    """The demo build's progress while ``make run`` builds it in the background (apps/core/demo_progress.py):
    pages show it until the demo is ready. Read from a small file, not the database: the build's transaction
    hides its rows until it ends. Nothing in production, which never builds a demo."""
    if settings.BELVEDERE_PROFILE == "production":
        return {}
    progress = read_progress(settings.DEMO_PROGRESS_FILE)
    if progress is None or progress.state == READY:
        return {}
    return {"demo_build": progress, "demo_build_running": progress.state == BUILDING}
