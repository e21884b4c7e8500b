"""Content negotiation for endpoints whose ``?format=`` names the *input* format (``format=megatron-log``,
``format=dcgmi-dmon``: the issues' API), not DRF's output-format override: they answer JSON whatever it says."""
from rest_framework.negotiation import DefaultContentNegotiation


class FormatIsOurs(DefaultContentNegotiation):
    """``?format=`` is the view's own parameter: the first renderer answers (the view lists only JSON)."""

    def select_renderer(self, request, renderers, format_suffix=None):
        renderer = renderers[0]
        return renderer, renderer.media_type
