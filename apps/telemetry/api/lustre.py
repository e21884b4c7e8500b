"""Import of lustre text through POST /api/v1/telemetry/import/ (being built: issue 21)."""
from apps.core.api.exceptions import InputError


def import_text(request, text: str, *, params: dict, cluster: str, scope, nbytes: int):
    raise InputError("this import format is not built yet", status_code=400)
