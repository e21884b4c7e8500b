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
    "400": "The request is malformed; `errors` says what and where.",
    "401": "No or invalid credentials.",
    "403": "Authenticated, but not allowed to see or change this.",
    "404": "No such object, or not visible to you.",
}


def add_error_responses(result, generator, request, public):
    """Postprocessing hook: add the shared Error component and 4xx responses to each operation."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    reference = {"$ref": "#/components/schemas/Error"}
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if method not in {"get", "put", "post", "patch", "delete"}:
                continue
            responses = operation.setdefault("responses", {})
            for code, description in _DEFAULT_ERRORS.items():
                if code == "400" and method in {"get", "delete"}:
                    continue
                responses.setdefault(code, {"description": description, "content": {"application/json": {"schema": reference}}})
    return result
