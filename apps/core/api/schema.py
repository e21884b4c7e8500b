"""drf-spectacular hooks: document the common error body on every operation."""

ERROR_SCHEMA = {
    "type": "object",
    "description": "The body of every 4xx answer.",
    "properties": {
        "detail": {"type": "string", "description": "One sentence for a human."},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "field": {"type": "string", "nullable": True, "description": "Dotted path into the request body."},
                    "line": {"type": "integer", "nullable": True, "description": "Line in an uploaded text, 1-based."},
                    "column": {"type": "integer", "nullable": True, "description": "Column in an uploaded text, 1-based."},
                    "message": {"type": "string"},
                },
                "required": ["field", "line", "message"],
            },
        },
    },
    "required": ["detail", "errors"],
}

_DEFAULT_ERRORS = {
    "400": "The request is malformed (a query parameter, a path value or the body); `errors` says what and where.",
    "401": "No or invalid credentials.",
    "403": "Authenticated, but not allowed to do this.",
    "404": "No such object, or not visible to you (the two are never told apart).",
    "429": "Too many requests: `detail` says when to try again (also in the Retry-After header).",
}
# Only where the method can carry a body or change state.
_WRITE_ERRORS = {
    "409": "The object changed or went away meanwhile, or its state does not allow this; `detail` says which.",
    "413": "The body is larger than the limit `detail` names (before or after decompression).",
    "415": "The body's Content-Type is missing or not one this operation reads; `detail` names it.",
}
_WRITE_METHODS = {"put", "post", "patch", "delete"}


def add_error_responses(result, generator, request, public):
    """Postprocessing hook: add the shared Error component and the 4xx answers every operation can
    give, so clients and fuzzers can check every answer against the schema."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    reference = {"$ref": "#/components/schemas/Error"}
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if method not in {"get", "put", "post", "patch", "delete"}:
                continue
            responses = operation.setdefault("responses", {})
            codes = dict(_DEFAULT_ERRORS)
            if method in _WRITE_METHODS:
                codes.update(_WRITE_ERRORS)
            for code, description in codes.items():
                responses.setdefault(code, {"description": description, "content": {"application/json": {"schema": reference}}})
    return result
