"""The explorer: a Dash app for quick plots of a telemetry product, opened pre-filled with the product's query.

``/catalog/explorer/?product=dcgm-device`` shows the portal page around it; the Dash app itself lives
under ``/catalog/explorer/app/`` and is served through a Django view (``views.explorer_app``), so it
runs in the portal's process with its sign-in, and its callbacks know who asks (``CURRENT_USER``).
Staff plot any nodes; everyone else plots the nodes of one of their jobs, within its run time —
the same rule as the telemetry API.
"""
from __future__ import annotations

import contextvars
from datetime import timedelta
from functools import lru_cache

import dash
import flask
from dash import Input, Output, State, dcc, html

from apps.core import hostlists

PREFIX = "/catalog/explorer/app/"
GROUP_BY = ("host", "gpu", "field")
STATS = ("mean", "min", "max")
MIN_WINDOW, MAX_WINDOW = 60, 90 * 86400  # a minute to the telemetry store's 90 days
MAX_FIELDS = 16
# What each control is called on the page: a bad value's message names it so.
CONTROL_WORDS = {"product": "Product", "fields": "Fields", "window": "Window", "group_by": "Lines per", "stat": "Statistic",
                 "hosts": "Nodes", "job": "Job"}
CURRENT_USER: contextvars.ContextVar = contextvars.ContextVar("catalog_explorer_user", default=None)
WINDOWS = [("15 min", 900), ("1 h", 3600), ("2 h", 7200), ("6 h", 21600), ("1 day", 86400), ("3 days", 259200), ("7 days", 604800)]
MAX_BUCKETS = 300
MAX_HOSTS = 512


def _telemetry_products():
    from .models import DataProduct

    return [p for p in DataProduct.objects.exclude(status="retired").order_by("name") if p.definition["source"]["kind"] == "telemetry"]


def _params_serializer():
    """The controls' values as a serializer checks them (built lazily: DRF needs Django's settings)."""
    from rest_framework import serializers

    from apps.core.api.fields import StrictCharField
    from apps.core.api.params import JobRefField, QueryIntegerField

    class PlotParams(serializers.Serializer):
        product = StrictCharField(max_length=200)
        fields = serializers.ListField(child=QueryIntegerField(min_value=0, max_value=65535), max_length=MAX_FIELDS, allow_empty=True)
        window = QueryIntegerField(min_value=MIN_WINDOW, max_value=MAX_WINDOW)
        group_by = serializers.ChoiceField(choices=GROUP_BY)
        stat = serializers.ChoiceField(choices=STATS)
        hosts = StrictCharField(max_length=20_000, allow_blank=True, trim_whitespace=False)
        job = JobRefField(allow_null=True)

    return PlotParams


def check_controls(values: dict) -> tuple[dict | None, str]:
    """(the controls' values checked, "") or (None, a sentence naming the control that is wrong and why)."""
    values = {**values, "job": values.get("job") or None}
    serializer = _params_serializer()(data=values)
    if serializer.is_valid():
        return dict(serializer.validated_data), ""
    name, errors = next(iter(serializer.errors.items()))
    message = errors[0] if isinstance(errors, list) and errors and not isinstance(errors[0], (dict, list)) else \
        next((str(item[0]) for item in (errors.values() if isinstance(errors, dict) else []) if item), "not valid")
    return None, f"{CONTROL_WORDS.get(name, name)}: {message}"


def _job_ref(text: str):
    """``cluster/job_id`` as a JobRef, or None when it is not one."""
    from rest_framework import serializers

    from apps.core.api.params import JobRefField

    try:
        return JobRefField().run_validation(text)
    except serializers.ValidationError:
        return None


def _address_values(query: dict) -> dict:
    """What the address asks for, each value kept only when it is valid (a pre-filled control never fails)."""
    from apps.core.api.params import CommaListField, QueryIntegerField, parse_params
    from rest_framework import serializers

    class AddressParams(serializers.Serializer):
        fields = CommaListField(child=QueryIntegerField(min_value=0, max_value=65535), max_length=MAX_FIELDS, required=False)
        window = QueryIntegerField(min_value=MIN_WINDOW, max_value=MAX_WINDOW, required=False)
        group_by = serializers.ChoiceField(choices=GROUP_BY, required=False)
        stat = serializers.ChoiceField(choices=STATS, required=False)

    kept = {}
    for name in ("fields", "window", "group_by", "stat"):
        if query.get(name):
            try:
                kept.update(parse_params({name: query[name]}, AddressParams))
            except serializers.ValidationError:
                pass
    return kept


def defaults(product, query: dict) -> dict:
    """The controls' starting values: the product's explorer block, then what the address validly asks for."""
    definition = product.definition
    explorer = definition.get("explorer") or {}
    schema_fields = [column["field"] for column in definition["schema"] if column.get("field") is not None]
    fields = explorer.get("fields") or schema_fields[:2]
    asked = _address_values(query)
    if asked.get("fields"):
        fields = [f for f in asked["fields"] if f in schema_fields] or fields
    return {"product": product.name, "fields": fields, "window": asked.get("window", explorer.get("window", 7200)),
            "group_by": asked.get("group_by") or explorer.get("group_by", "host"), "stat": asked.get("stat") or explorer.get("stat", "mean"),
            "hosts": str(query.get("hosts", ""))[:20_000], "job": str(query.get("job", ""))[:200], "step": explorer.get("step", 60)}


def field_options(product) -> list[dict]:
    return [{"label": f"{column['name']} ({column.get('unit', '')})", "value": column["field"]}
            for column in product.definition["schema"] if column.get("field") is not None]


def job_options(user) -> list[dict]:
    from apps.jobs.selectors import job_list_for_user

    jobs = job_list_for_user(user).exclude(start_time__isnull=True).order_by("-start_time")[:50]
    return [{"label": f"{job.cluster.name}/{job.job_id} {job.name[:40]} ({job.state})", "value": f"{job.cluster.name}/{job.job_id}"}
            for job in jobs]


def opening_job(user, product, options: list[dict]) -> str | None:
    """The job a researcher's explorer opens on: their latest job that fits the product (added to ``options``
    when it is older than the fifty listed)."""
    from .selectors import latest_job_for

    job = latest_job_for(user, product)
    if job is not None and job not in {option["value"] for option in options}:
        options.insert(0, {"label": job, "value": job})
    return job


def plot(user, *, product_name: str, fields: list[int], window: int, group_by: str, stat: str, hosts_text: str, job_key):
    """The figure and a sentence for the controls' values (checked: see ``check_controls``), as ``user`` may see them.
    ``job_key`` is a JobRef (or "cluster/id" text), or empty."""
    from django.utils import timezone

    from apps.telemetry.backends.base import Query, TelemetryUnavailable
    from apps.telemetry.products import choose_step
    from apps.telemetry.store import telemetry_store

    from .figures import empty_figure, series_figure, window_note
    from .models import DataProduct

    product = DataProduct.objects.filter(name=product_name).first()
    if product is None or product.definition["source"]["kind"] != "telemetry":
        return empty_figure("Choose a telemetry product."), "Choose a telemetry product."
    labels = {column["field"]: f"{column['name']} ({column.get('unit', '')})" for column in product.definition["schema"]
              if column.get("field") is not None}
    fields = [f for f in fields or [] if f in labels]
    if not fields:
        return empty_figure("Choose at least one field."), "Choose at least one field."
    end = timezone.now()
    start = end - timedelta(seconds=int(window))
    hosts = None
    if user is None or not user.is_authenticated:
        return empty_figure("Sign in to plot."), "Sign in to plot."
    if user.is_staff and not job_key:
        if hosts_text.strip():
            try:
                hosts = tuple(dict.fromkeys(hostlists.expand(hosts_text)))  # Slurm's grammar, each node once
            except hostlists.HostlistError as exc:
                return empty_figure(f"Nodes: {exc} (e.g. nid[000001-000004])"), f"Nodes: {exc} (e.g. nid[000001-000004])"
            if len(hosts) > MAX_HOSTS:
                return empty_figure(f"At most {MAX_HOSTS} nodes at a time."), f"At most {MAX_HOSTS} nodes at a time."
    else:
        from apps.jobs.selectors import job_get_for_user

        if isinstance(job_key, str):
            job_key = _job_ref(job_key)
        job = job_get_for_user(user, job_key.cluster, job_key.job_id) if job_key else None
        if job is None:
            return (empty_figure("Choose one of your jobs"),
                    "Choose one of your jobs: you may plot the nodes of your own and your projects' jobs (staff: any nodes).")
        hosts = tuple(job.node_list or ())
        ran = job.run_window(open_end=True)
        if ran is not None:  # the window asked for, ending when the job ended (or now), never before it started
            end = min(end, ran[1]) if ran[1] else end
            start = max(end - timedelta(seconds=int(window)), ran[0])
        if end <= start:
            return empty_figure("The job did not run yet."), "The job did not run yet."
    store = telemetry_store(product.definition["source"].get("store", "default"))
    step_declared = int((product.definition.get("explorer") or {}).get("step", 60) or 60)

    def read(start, end):
        step = max(step_declared, choose_step((end - start).total_seconds(), MAX_BUCKETS))  # a step the store's rollups serve
        step = store.retention.step_for(start, store.now(), step) or step  # and the tier holding the window (issue 40)
        return step, store.aggregate(Query(start=start, end=end, fields=tuple(fields), hosts=hosts), step, ("mean", "min", "max"))

    moved = f"Job {job_key.cluster}/{job_key.job_id}: " if job_key else ""
    try:
        step, frame = read(start, end)
        newest = product.newest_sample
        if frame.empty and newest is not None and newest < start and not job_key:
            # Nothing in the window: show the same span up to the newest sample the checks saw, and say so.
            moved += f"No samples since {newest:%Y-%m-%d %H:%M} UTC: this is the window up to the newest sample. "
            end = newest + timedelta(seconds=step_declared)
            start = end - timedelta(seconds=int(window))
            step, frame = read(start, end)
    except TelemetryUnavailable as exc:
        return empty_figure("The telemetry store cannot be read."), f"The telemetry store cannot be read: {exc}"
    figure, sentence = series_figure(frame, group_by=group_by, stat=stat, labels=labels, title=product.title, window=(start, end))
    return figure, f"{moved}{sentence} {window_note(start, end, step, len(frame))}"


def _query(search) -> dict:
    from urllib.parse import parse_qs

    return {key: values[-1] for key, values in parse_qs((search if isinstance(search, str) else "").lstrip("?")).items()}


@lru_cache(maxsize=1)
def dash_app() -> dash.Dash:
    server = flask.Flask("belvedere-explorer")
    server.config["PROPAGATE_EXCEPTIONS"] = True  # an error in a callback is Django's to log and answer, like any view's
    # use_async=False: Dash turns async dispatch on when asgiref is installed (Django brings it); the ORM needs sync callbacks.
    app = dash.Dash("belvedere-explorer", server=server, requests_pathname_prefix=PREFIX, routes_pathname_prefix=PREFIX,
                    serve_locally=True, title="Belvedere explorer", update_title=None, use_async=False,
                    external_stylesheets=["/static/css/belvedere.css"], suppress_callback_exceptions=True)
    from .figures import empty_figure

    control = {"minWidth": "12rem", "flex": "1"}
    app.layout = html.Div(className="explorer", children=[
        dcc.Location(id="url"),
        html.Div(style={"display": "flex", "gap": "1rem", "flexWrap": "wrap", "alignItems": "flex-end"}, children=[
            html.Label(["Product", dcc.Dropdown(id="product", clearable=False)], style=control),
            html.Label(["Fields", dcc.Dropdown(id="fields", multi=True)], style={**control, "flex": "2"}),
            html.Label(["Window", dcc.Dropdown(id="window", clearable=False,
                                               options=[{"label": label, "value": value} for label, value in WINDOWS])], style=control),
            html.Label(["Lines per", dcc.Dropdown(id="group_by", clearable=False, options=[
                {"label": "node", "value": "host"}, {"label": "GPU", "value": "gpu"}, {"label": "field (all nodes)", "value": "field"}])],
                style=control),
            html.Label(["Statistic", dcc.Dropdown(id="stat", clearable=False, options=["mean", "min", "max"])], style=control),
        ]),
        html.Div(style={"display": "flex", "gap": "1rem", "flexWrap": "wrap", "marginTop": ".5rem"}, children=[
            html.Label(["Nodes (staff; a Slurm hostlist, empty for all)", dcc.Input(id="hosts", type="text", debounce=True,
                                                                                     placeholder="nid[001905-001912]")],
                       style={**control, "flex": "2"}),
            html.Label(["Or one of your jobs", dcc.Dropdown(id="job")], style={**control, "flex": "2"}),
        ]),
        # The first figure is a message, never Plotly's empty grid from -1 to 6 while the first plot is drawn.
        dcc.Loading(dcc.Graph(id="plot", figure=empty_figure("Drawing the first plot…"),
                              config={"displaylogo": False, "toImageButtonOptions": {"filename": "belvedere-explorer"}})),
        html.P(id="note", className="small muted"),
    ])

    @app.callback(Output("product", "options"), Output("product", "value"), Output("window", "value"), Output("group_by", "value"),
                  Output("stat", "value"), Output("hosts", "value"), Output("job", "options"), Output("job", "value"),
                  Input("url", "search"))
    def prefill(search):
        query = _query(search)
        products = _telemetry_products()
        options = [{"label": p.title, "value": p.name} for p in products]
        chosen = next((p for p in products if p.name == query.get("product")), products[0] if products else None)
        user = CURRENT_USER.get()
        jobs = job_options(user) if user is not None and user.is_authenticated else []
        if chosen is None:
            return options, None, 7200, "host", "mean", "", jobs, None
        values = defaults(chosen, query)
        job = values["job"] or None
        if job is None and user is not None and user.is_authenticated and not user.is_staff and not values["hosts"]:
            job = opening_job(user, chosen, jobs)  # a researcher opens on their latest job, never on an empty plot
        return options, chosen.name, values["window"], values["group_by"], values["stat"], values["hosts"], jobs, job

    @app.callback(Output("fields", "options"), Output("fields", "value"), Input("product", "value"), State("url", "search"))
    def fields_of(product_name, search):
        """The product's fields; the address's (or the product's explorer) choice of them."""
        from .models import DataProduct

        product = DataProduct.objects.filter(name=product_name).first() if isinstance(product_name, str) else None
        if product is None:
            return [], []
        query = _query(search)
        return field_options(product), defaults(product, query if query.get("product") == product.name else {})["fields"]

    @app.callback(Output("plot", "figure"), Output("note", "children"), Input("product", "value"), Input("fields", "value"),
                  Input("window", "value"), Input("group_by", "value"), Input("stat", "value"), Input("hosts", "value"),
                  Input("job", "value"), State("url", "search"))
    def draw(product_name, fields, window, group_by, stat, hosts_text, job_key, _search):
        """Every value is checked first: a wrong one (a browser or a script may send anything) is an empty figure
        and a note naming the control, never an error."""
        values, problem = check_controls({"product": product_name or "", "fields": [] if fields is None else fields,
                                          "window": 7200 if window is None else window, "group_by": group_by or "host",
                                          "stat": stat or "mean", "hosts": hosts_text or "", "job": job_key or None})
        if values is None:
            from .figures import empty_figure

            return empty_figure(problem), problem
        return plot(CURRENT_USER.get(), product_name=values["product"], fields=values["fields"], window=values["window"],
                    group_by=values["group_by"], stat=values["stat"], hosts_text=values["hosts"], job_key=values["job"])

    return app
