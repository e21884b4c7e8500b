"""The definition of GPU-hours lost and headroom, shown where the numbers are (system page, reports, triage):
one sentence with the rest in a tooltip and a link, the words of apps/saturation/waste.py."""
from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from apps.saturation.waste import HEADROOM_WORDS, LOSS_HELP_URL, LOSS_WORDS, WARMING_UP_WORDS

register = template.Library()


@register.simple_tag
def loss_definition(anchor: bool = False):
    """``<p>`` with the loss sentence, the headroom sentence in its tooltip and a link to where both are written out
    (``anchor``: this is that place, the system page)."""
    return format_html('<p class="small muted loss-definition"{}><span title="{}">{}</span> {} <a href="{}">What lost means</a></p>',
                       mark_safe(' id="what-lost-means"') if anchor else "", HEADROOM_WORDS, LOSS_WORDS, HEADROOM_WORDS, LOSS_HELP_URL)


@register.simple_tag
def warming_up_words():
    return WARMING_UP_WORDS
