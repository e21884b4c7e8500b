from django.conf import settings
from django.urls import reverse

from .navigation import navigation_for


def navigation(request):
    """Navigation entries the user may see, with the current section marked."""
    path = request.path
    items = []
    for item in navigation_for(request.user):
        url = reverse(item.url_name)
        items.append({"key": item.key, "label": item.label, "url": url, "current": path.startswith(url)})
    return {
        "nav_items": items,
        "belvedere_profile": settings.BELVEDERE_PROFILE,
        "oidc_enabled": settings.OIDC_ENABLED,
        "oidc_provider_name": settings.OIDC_PROVIDER_NAME,
    }
