"""Query parameters of the Flight Recorder endpoint."""
from rest_framework import serializers

from apps.core.api.params import QueryIntegerField

FORMATS = ("auto", "pickle", "json", "tar")
MAX_RANK = 1_048_575


class FlightPostParams(serializers.Serializer):
    rank = QueryIntegerField(min_value=0, max_value=MAX_RANK, required=False,
                             help_text="the rank whose dump this is (required for one dump; a tar names ranks in its files)")
    format = serializers.ChoiceField(choices=FORMATS, required=False, default="auto",
                                     help_text="auto: pickle or JSON as the body starts; tar: a .tar.gz of the dump folder, "
                                               "files named <prefix><rank> as PyTorch names them")
