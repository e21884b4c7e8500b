"""drf-spectacular hooks: document the common error body on every operation, and give every operation a
summary (the one line Swagger UI and Redoc list it by)."""
import copy
import re


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
    "400": "The request is malformed (a query parameter, a path value or the body); `errors` says what and where. "
           "A request line or header the web server cannot read gets the web server's HTML page instead.",
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
# What the web server (gunicorn, as deploy/supervisord.conf starts it; nginx in front answers the same codes for its
# own limits) answers before the request reaches the portal: an HTML page, not the Error body. 400 (a malformed
# request line or header) is documented above and gets the HTML variant beside the JSON one.
_SERVER_HTML = {"text/html": {"schema": {"type": "string", "description": "The web server's own HTML error page."}}}
_SERVER_ERRORS = {
    "414": "URI Too Long: the request line (method, path and query string) is longer than the web server reads "
           "(gunicorn's limit_request_line, 4,094 bytes). Send long lists in a POST body, or ask in parts.",
    "417": "Expectation Failed: an Expect header other than 100-continue.",
    "431": "Request Header Fields Too Large: a header longer than 8,190 bytes or more than 100 headers "
           "(gunicorn's limit_request_field_size and limit_request_fields).",
    "501": "Not Implemented: a Transfer-Encoding the web server does not know, e.g. br (send the body with a "
           "Content-Length or chunked; compress it with Content-Encoding).",
}


def add_error_responses(result, generator, request, public):
    """Postprocessing hook: add the shared Error component and the 4xx answers every operation can
    give, the web server's own answers included, so clients and fuzzers can check every answer against the schema."""
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
            responses["400"].setdefault("content", {}).update(copy.deepcopy(_SERVER_HTML))
            for code, description in _SERVER_ERRORS.items():
                responses.setdefault(code, {"description": f"{description} Answered by the web server before the portal "
                                                           "sees the request, as an HTML page.",
                                            "content": copy.deepcopy(_SERVER_HTML)})
    return result


# ---------------------------------------------------------------------------------------------
# Summaries
# ---------------------------------------------------------------------------------------------
SUMMARY_LENGTH = 80
_METHODS = ("get", "put", "post", "patch", "delete")
_PREFIX = ("api", "v1")
_IRREGULAR = {"data": "data", "series": "series", "status": "status", "analysis": "analysis", "me": "me",
              "people": "person", "inventory": "inventory", "summary": "summary", "overview": "overview",
              "news": "news", "process": "process", "access": "access", "usage": "usage", "sharing": "sharing", "triage": "triage item"}


def first_sentence(docstring: str | None, limit: int = SUMMARY_LENGTH) -> str:
    """A docstring's first sentence as a summary: one line, no reStructuredText quotes, at most ``limit``
    characters (cut at a clause, else at a word with "…"). Empty when there is no docstring."""
    text = (docstring or "").strip()
    if not text:
        return ""
    paragraph = re.split(r"\n\s*\n", text, maxsplit=1)[0]
    line = " ".join(paragraph.split()).replace("``", "")
    match = re.search(r"(?<=[.!?])\s(?=[A-Z0-9(`\"?])", line)
    if match:
        line = line[:match.start()]
    # "One item; PATCH moves its state": what another method does belongs to that method.
    line = re.split(r"; (?=(?:GET|POST|PUT|PATCH|DELETE)\b)", line, maxsplit=1)[0]
    line = line.rstrip(".").strip()
    if len(line) > limit:
        bracket = line.find(" (", 20, limit)
        clause = max(line.rfind(mark, 20, limit) for mark in ("; ", ": ", ", "))
        if bracket > 0:
            line = line[:bracket]
        elif clause > 0:
            line = line[:clause]
        else:
            cut = line[:limit - 1]
            cut = cut[:cut.rfind(" ")] if " " in cut else cut
            line = cut.rstrip(" ,;:(-") + "…"
    return line[:1].upper() + line[1:]


def _singular(word: str) -> str:
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _plural(word: str) -> bool:
    return _singular(word) != word


def _a(noun: str) -> str:
    first = noun.split()[0] if noun.split() else noun
    if first.isupper():  # an acronym is said letter by letter: "an EDF", "a GPU"
        return ("an " if first[:1] in "AEFHILMNORSX" else "a ") + noun
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


_ACRONYMS = {"edf": "EDF", "gpu": "GPU", "gpus": "GPUs", "api": "API", "mig": "MIG", "dcgm": "DCGM"}


def _words(segment: str) -> str:
    return " ".join(_ACRONYMS.get(word, word) for word in re.sub(r"[-_.]+", " ", segment).split())


def summary_from_path(method: str, path: str) -> str:
    """What ``METHOD path`` does, in plain words, for an operation nothing describes:
    GET /api/v1/jobs/ -> "List jobs", GET /api/v1/jobs/{id}/ -> "Get a job",
    POST /api/v1/vetting/nodes/{host}/actions/ -> "Add an action to a node",
    POST /api/v1/namespaces/requests/{id}/approve/ -> "Approve a request"."""
    method = method.lower()
    parts = [part for part in path.strip("/").split("/") if part]
    while parts and parts[0] in _PREFIX:
        parts = parts[1:]
    # A file suffix on the last part ("usage.{extension}") names the format, not the thing.
    if parts:
        parts[-1] = re.sub(r"\.\{[^}]*\}$", "", parts[-1])
    words = [(part.startswith("{") and part.endswith("}"), _words(part.strip("{}"))) for part in parts]
    if not words:
        return {"get": "Read the API root"}.get(method, f"{method.upper()} the API root")
    is_item = words[-1][0]
    names = [text for param, text in words if not param and text]
    target = names[-1] if names else "item"
    # The thing the target belongs to: the last name before it that is followed by a parameter.
    owner = ""
    for index in range(len(words) - 1 - (1 if is_item else 0) - 1, -1, -1):
        param, text = words[index]
        if not param and index + 1 < len(words) and words[index + 1][0]:
            owner = _singular(text)
            break
    of_owner = f" of {_a(owner)}" if owner and not is_item else ""
    if is_item:
        noun = _singular(target)
        # The owner of an item is the name before the item's own name, when that one has a parameter too.
        item_owner = ""
        name_indexes = [i for i, (param, _) in enumerate(words) if not param]
        if len(name_indexes) >= 2:
            before = name_indexes[-2]
            if before + 1 < len(words) and words[before + 1][0]:
                item_owner = _singular(words[before][1])
        tail = f" of {_a(item_owner)}" if item_owner else ""
        verbs = {"get": f"Get {_a(noun)}", "put": f"Replace {_a(noun)}", "patch": f"Update {_a(noun)}",
                 "delete": f"Delete {_a(noun)}", "post": f"Act on {_a(noun)}"}
        return verbs[method] + tail if method in verbs else f"{method.upper()} {_a(noun)}{tail}"
    if not is_item:
        run = []
        for param, text in reversed(words):
            if param:
                break
            run.insert(0, text)
        if len(run) > 1:
            target = " ".join([*(_singular(word) for word in run[:-1]), run[-1]])
    plural = _plural(target.split()[-1])
    if method == "get":
        return (f"List {target}" if plural else f"Get the {target}") + of_owner
    if method == "post":
        if plural:
            noun = " ".join([*target.split()[:-1], _singular(target.split()[-1])])
            return f"Add {_a(noun)} to {_a(owner)}" if owner else f"Create {_a(noun)}"
        # A name after an object's parameter is an action on it: "approve", "teardown", "resolve".
        if owner:
            return f"{target[:1].upper()}{target[1:]} {_a(owner)}"
        return f"Submit {_a(target)}" if " " not in target else f"Submit the {target}"
    verbs = {"put": "Replace", "patch": "Update", "delete": "Delete"}
    return f"{verbs.get(method, method.upper())} the {target}{of_owner}"


def _normalised(path: str) -> str:
    """A path with every parameter as ``{}``: the generator's and the schema's spellings then agree."""
    return re.sub(r"\{[^}]*\}", "{}", path).rstrip("/")


def _own_doc(owner) -> str:
    """A docstring written in this project (modules under ``apps.``), not one inherited from a library."""
    if owner is None or not str(getattr(owner, "__module__", "")).startswith("apps."):
        return ""
    return (owner.__dict__.get("__doc__") if isinstance(owner, type) else getattr(owner, "__doc__", None)) or ""


def _view_docstrings(generator) -> dict[tuple[str, str], tuple[str, str, int]]:
    """(normalised path, method) -> (the handler's own docstring, the view class's docstring where it
    describes this operation, else "", 1), from the generator's endpoints."""
    endpoints = list(getattr(generator, "endpoints", None) or [])
    per_class: dict[object, int] = {}
    found = {}
    for path, _regex, method, callback in endpoints:
        cls = getattr(callback, "cls", None)
        if cls is None:
            continue
        actions = getattr(callback, "actions", None) or {}
        name = actions.get(method.lower(), method.lower())
        handler = getattr(cls, name, None)
        handler_doc = _own_doc(getattr(handler, "__func__", handler)) if handler is not None else ""
        found[_normalised(path), method.lower()] = (handler_doc, _own_doc(cls), cls, name)
        per_class[cls] = per_class.get(cls, 0) + 1
        if method.lower() == "get":
            per_class[cls, "get"] = per_class.get((cls, "get"), 0) + 1
    out = {}
    for key, (handler_doc, class_doc, cls, name) in found.items():
        method = key[1]
        # A view's docstring describes the operation when the view has no other, when it is the view's one
        # GET, or the list of a viewset; never where it starts by naming another method ("POST a request").
        describes = (per_class[cls] == 1 or name == "list"
                     or (method == "get" and per_class.get((cls, "get")) == 1))
        names_other = re.match(r"(GET|POST|PUT|PATCH|DELETE)\b", class_doc.strip())
        if names_other and names_other.group(1).lower() != method:
            describes = False
        out[key] = (handler_doc, class_doc if describes else "", 1)
    return out


def summary_for(method: str, path: str, docstrings: tuple[str, str, int] | None, description: str = "") -> str:
    """The summary of one operation: its handler's docstring; else its view's docstring where that describes
    this operation (``_view_docstrings``); else, for an operation no view was found for, its description;
    else the method and the path in words."""
    handler_doc, class_doc, _ = docstrings or ("", "", 0)
    if first_sentence(handler_doc):
        return first_sentence(handler_doc)
    if first_sentence(class_doc):
        return first_sentence(class_doc)
    if docstrings is None and description:
        return first_sentence(description)
    return summary_from_path(method, path)


def add_summaries(result, generator, request, public):
    """Postprocessing hook: every operation without a summary gets one (see ``summary_for``), so Swagger UI
    and Redoc list each by what it does rather than by its path alone."""
    docstrings = _view_docstrings(generator)
    for path, path_item in result.get("paths", {}).items():
        for method, operation in path_item.items():
            if method not in _METHODS or operation.get("summary"):
                continue
            found = docstrings.get((_normalised(path), method))
            operation["summary"] = summary_for(method, path, found, operation.get("description", ""))
    return result
