from django.conf import settings
from django.urls import reverse

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
