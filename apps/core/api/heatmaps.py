"""What the job's heatmap endpoints share (telemetry's field heatmap, saturation's metric heatmap): the
query options (mode, rows, the visible window) and the response parts that describe a compact heatmap
(apps/core/heatmaps.py). Both apps build on these; neither imports the other's API."""
from datetime import datetime, timezone

import numpy as np
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core import heatmaps


@extend_schema_field({"type": "string", "format": "date-time", "example": "2026-11-21T10:00:00Z"})
class HeatmapTimeField(serializers.Field):
    """An ISO 8601 time (``2026-11-21T10:00:00Z``); without a zone it is UTC (what Plotly's axes give)."""

    default_error_messages = {"invalid": "{text!r} is not an ISO 8601 time such as 2026-11-21T10:00:00Z",
                              "range": "give a time between 1970 and 2200"}

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def validate_empty_values(self, data):
        if isinstance(data, str) and not data.strip():  # ?start= is no window start
            return True, None
        return super().validate_empty_values(data)

    def to_internal_value(self, data):
        text = str(data).strip()[:64]
        try:
            moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            self.fail("invalid", text=text[:40])
        if not 1970 <= moment.year <= 2200:  # also keeps clear of datetime's and numpy's nanosecond limits
            self.fail("range")
        return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)

    def to_representation(self, value):
        return value.isoformat()


class HeatmapOptions(serializers.Serializer):
    """What both heatmap endpoints accept besides the metric: mode, rows, the visible window."""

    mode = serializers.ChoiceField(choices=["value", "deviation"], required=False,
                                   error_messages={"invalid_choice": "choose value or deviation"},
                                   help_text="value: the metric on its fixed physical (or data) range; deviation: value minus "
                                             "the median of its peers in each time bin, on a diverging scale")
    rows = serializers.ChoiceField(choices=["auto", "gpu"], required=False,
                                   error_messages={"invalid_choice": "choose auto or gpu"},
                                   help_text=f"auto: above {heatmaps.MAX_ROWS:,} GPUs rows are aggregated by node (or stage, "
                                             "group), keeping each cell's worst member and the mean; gpu: one row per GPU")
    start = HeatmapTimeField(help_text="ISO 8601 start of the visible window (UTC when no zone)")
    end = HeatmapTimeField(help_text="ISO 8601 end of the visible window (exclusive)")

    def validate(self, attrs):
        if attrs.get("start") and attrs.get("end") and attrs["start"] >= attrs["end"]:
            raise serializers.ValidationError({"end": "end must be after start"})
        return attrs


def as_datetime64(moment: datetime | None):
    return None if moment is None else np.datetime64(moment.astimezone(timezone.utc).replace(tzinfo=None), "ns")


def heatmap_options(params: dict) -> dict:
    """The keyword arguments of ``heatmaps.compact`` that come from HeatmapOptions."""
    return {"mode": params.get("mode") or "value", "rows_mode": params.get("rows") or "auto",
            "start": as_datetime64(params.get("start")), "end": as_datetime64(params.get("end"))}


# -- response parts -------------------------------------------------------------------------------

class HeatmapScale(serializers.Serializer):
    """The colour range: ``z`` and ``mean`` bytes 0..254 map linearly onto [zmin, zmax] (value = zmin + code / 254
    × (zmax − zmin)); values outside were clipped to the ends; 255 means no data."""

    zmin = serializers.FloatField()
    zmax = serializers.FloatField()
    kind = serializers.ChoiceField(choices=["physical", "fraction", "data", "deviation"],
                                   help_text="physical: a fixed range from the GPU model (clock base to max boost, idle to "
                                             "slowdown temperature, 0 to the power limit); fraction: 0-1 (or 0-100 %); data: "
                                             "the data's true min-max; deviation: ±D around the peers' median")
    source = serializers.CharField(help_text="Where the range comes from, in words.")
    bad = serializers.ChoiceField(choices=["low", "high"], help_text="Which direction is a problem for this quantity.")
    colorscale = serializers.JSONField(help_text='"Viridis", or for deviations a diverging Plotly colour scale '
                                                 "([[position, colour], ...]) with the bad side red.")


class HeatmapWindow(serializers.Serializer):
    """The time window the answer covers: the one asked for (start/end), else the product's whole span."""

    start = serializers.DateTimeField(allow_null=True)
    end = serializers.DateTimeField(allow_null=True)


class HeatmapCoverage(serializers.Serializer):
    """The data's real extent: start of the first and end of the last bin holding any value (null without data)."""

    first = serializers.DateTimeField(allow_null=True)
    last = serializers.DateTimeField(allow_null=True)


class HeatmapSeparator(serializers.Serializer):
    """A row where the pipeline stage (sort pp) or the dragonfly group (sort group) changes, the first row included."""

    row = serializers.IntegerField(min_value=0)
    label = serializers.CharField(help_text='"stage 3", "group 12"')


class HeatmapShade(serializers.Serializer):
    """A time span to shade (the warm-up before the steady state, only where there is data in it)."""

    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    label = serializers.CharField()
