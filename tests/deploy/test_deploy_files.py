"""The production deployment files (deploy/) are complete and agree with each other and the code.

Docker, Compose, systemd and nginx are not needed: every file is parsed here (YAML, a small
Dockerfile and nginx tokenizer, configparser for the units) and checked against the entry points,
the settings documented in deploy/env.example, and the files in the repository. Two checks run
real code in a subprocess: the image's build-time collectstatic with exactly the Dockerfile's
environment, and the container health probe against a throwaway HTTP server.

No database and no Django settings are used by the test process itself.
"""

import configparser
import http.server
import json
import os
import re
import secrets
import shlex
import socket
import subprocess
import sys
import threading
from pathlib import Path, PurePosixPath
from typing import ClassVar
from urllib.parse import urlsplit

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SYSTEMD = DEPLOY / "systemd"
VENV_BIN = PurePosixPath("/opt/belvedere/.venv/bin")
REQUIRED = ("SECRET_KEY", "DATABASE_URL", "ALLOWED_HOSTS", "CELERY_BROKER_URL")
PROCESSES = ("web", "worker", "beat")
UNITS = {name: SYSTEMD / f"belvedere-{name}.service" for name in PROCESSES}
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:[:?\-+][^}]*)?\}")


# ---------------------------------------------------------------------------------------------
# Parsing helpers
# ---------------------------------------------------------------------------------------------
def env_example() -> dict[str, str]:
    """NAME -> value for every `NAME=value` and commented-out `#NAME=value` line."""
    names = {}
    for line in (DEPLOY / "env.example").read_text().splitlines():
        match = re.match(r"^#?([A-Z][A-Z0-9_]*)=(.*)$", line.strip())
        if match:
            names[match.group(1)] = match.group(2)
    return names


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def services() -> dict:
    return compose()["services"]


def is_app_service(service: dict) -> bool:
    """Built from deploy/Dockerfile (the compose file lives in deploy/, paths are relative to it)."""
    build = service.get("build")
    if not isinstance(build, dict):
        return False
    dockerfile = (DEPLOY / build.get("context", ".") / build.get("dockerfile", "Dockerfile")).resolve()
    return dockerfile == (DEPLOY / "Dockerfile").resolve()


def app_services() -> dict:
    return {name: service for name, service in services().items() if is_app_service(service)}


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def command(service: dict) -> list[str]:
    cmd = service.get("command")
    return shlex.split(cmd) if isinstance(cmd, str) else [str(token) for token in cmd or []]


def depends_on(service: dict) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: "service_started" for name in deps}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def fill_placeholders(value: str) -> str:
    """`${VAR:?message}` -> a dummy value, as Compose would substitute from deploy/.env."""
    return INTERPOLATION.sub("placeholder", value)


def mounts(service: dict) -> list[tuple[str, str, bool]]:
    """(source, target, read_only) of every volume entry, short or long syntax."""
    result = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            parts = volume.split(":")
            read_only = len(parts) > 2 and "ro" in parts[2].split(",")
            result.append((parts[0], parts[1], read_only))
        else:
            result.append((volume["source"], volume["target"], bool(volume.get("read_only"))))
    return result


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with line continuations joined and comments dropped."""
    instructions, pending = [], ""
    for raw in (DEPLOY / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not pending):
            continue  # Docker drops comment lines, also inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if line:
            keyword, _, args = line.partition(" ")
            instructions.append((keyword.upper(), args.strip()))
    assert not pending, "the Dockerfile ends inside a line continuation"
    return instructions


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile()
    last_from = max(index for index, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[last_from:]


def exec_form(args: str) -> list[str]:
    """A CMD/HEALTHCHECK CMD argument in JSON (exec) form, or a shell form split like sh would."""
    args = args.strip()
    return json.loads(args) if args.startswith("[") else shlex.split(args)


def env_instruction(args: str) -> dict[str, str]:
    if "=" not in args.split()[0]:  # legacy `ENV NAME value`
        name, _, value = args.partition(" ")
        return {name: value.strip()}
    return dict(token.split("=", 1) for token in shlex.split(args))


def image_env() -> dict[str, str]:
    env = {}
    for keyword, args in final_stage():
        if keyword == "ENV":
            env.update(env_instruction(args))
    return env


def image_files() -> dict[PurePosixPath, Path]:
    """Where each plain COPY of the final stage puts its source: image path -> repository path."""
    files, workdir = {}, PurePosixPath("/")
    for keyword, args in final_stage():
        if keyword == "WORKDIR":
            workdir = workdir / args
        elif keyword == "COPY" and "--from" not in args:
            tokens = [token for token in shlex.split(args) if not token.startswith("--")]
            *sources, dest = tokens
            for source in sources:
                target = workdir / dest
                if dest.endswith("/") or len(sources) > 1:
                    target = target / PurePosixPath(source).name
                files[target] = REPO / source
    return files


def read_unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string(path.read_text())
    return parser


def unit_values(path: Path, section: str, key: str) -> list[str]:
    """Every value of a key that may repeat (Environment=), which configparser would collapse."""
    values, current = [], None
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            current = stripped[1:-1]
        elif current == section and stripped.startswith(f"{key}="):
            values.append(stripped[len(key) + 1 :])
    return values


def exec_start(path: Path) -> str:
    """ExecStart as systemd reads it: backslash-newline continuations joined."""
    value = read_unit(path)["Service"]["ExecStart"]
    return re.sub(r"\\\s*\n\s*", " ", value).strip()


def unescape_specifiers(value: str) -> str:
    """Resolve systemd %-specifiers; the units may only use %% (a literal percent sign)."""
    unknown = [match.group(0) for match in re.finditer(r"%.", value.replace("%%", ""))]
    assert not unknown, f"systemd would expand {unknown} itself: write %% for a literal %"
    return value.replace("%%", "%")


def nginx_tree() -> list:
    """nginx.conf as nested [name, args, children] directives (children None for simple ones)."""
    text = (DEPLOY / "nginx.conf").read_text()
    tokens = re.findall(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|#[^\n]*|[{};]|[^\s{};\"'#]+", text)
    root, stack, words = [], [], []
    current = root
    for token in tokens:
        if token.startswith("#"):
            continue
        if token == ";":
            assert words, "empty nginx directive"
            current.append([words[0], words[1:], None])
            words = []
        elif token == "{":
            block = [words[0], words[1:], []]
            current.append(block)
            stack.append(current)
            current, words = block[2], []
        elif token == "}":
            assert stack and not words, "unbalanced '}' in nginx.conf"
            current = stack.pop()
        else:
            words.append(token[1:-1] if token[0] in "\"'" else token)
    assert not stack, "unclosed '{' in nginx.conf"
    assert not words, "nginx.conf ends inside a directive"
    return root


def find(tree: list, name: str) -> list:
    """Every directive or block called `name`, at any depth."""
    found = []
    for directive in tree:
        if directive[0] == name:
            found.append(directive)
        if directive[2]:
            found.extend(find(directive[2], name))
    return found


def first_args(tree: list, name: str) -> list[str]:
    matches = [directive for directive in tree if directive[0] == name]
    assert matches, f"no {name} directive"
    return matches[0][1]


def size_in_bytes(value: str) -> int:
    match = re.fullmatch(r"(\d+)([kKmMgG]?)", value)
    assert match, value
    return int(match.group(1)) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[match.group(2).lower()]


# Entry points: what each process runs, the same in the image, in Compose and in the systemd units.
def role_of(argv: list[str]) -> str | None:
    program = PurePosixPath(argv[0]).name if argv else ""
    if program == "gunicorn" and "portal.wsgi" in argv:
        return "web"
    if program == "celery":
        app = (
            argv[argv.index("-A") + 1]
            if "-A" in argv
            else next((arg.split("=", 1)[1] for arg in argv if arg.startswith("--app=")), None)
        )
        if app == "portal":
            for role in ("worker", "beat"):
                if role in argv:
                    return role
    if program.startswith("python") and argv[1:2] == ["manage.py"] and "--noinput" in argv:
        return argv[2] if argv[2] in ("migrate", "collectstatic") else None
    return None


def option(argv: list[str], name: str) -> str | None:
    """Value of `--name=value` or `--name value`."""
    for index, arg in enumerate(argv):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name and index + 1 < len(argv):
            return argv[index + 1]
    return None


def check_process_flags(role: str, argv: list[str]) -> None:
    if role == "web":
        # Without --preload a missing setting kills every worker on import and gunicorn respawns
        # them forever; with it, the master exits 78 (bad configuration).
        assert "--preload" in argv, argv
    if role == "worker":
        assert {"--without-mingle", "--without-gossip"} <= set(argv), argv
        assert option(argv, "--loglevel") == "INFO", argv
    if role == "beat":
        assert option(argv, "--loglevel") == "INFO", argv


# ---------------------------------------------------------------------------------------------
# docker-compose.yml
# ---------------------------------------------------------------------------------------------
def test_compose_defines_the_whole_stack():
    assert {"web", "worker", "beat", "migrate", "postgres", "redis", "elasticsearch", "nginx"} <= set(services())
    assert {"web", "worker", "beat", "migrate"} <= set(app_services())


def test_every_app_service_runs_a_known_entry_point():
    for name, service in app_services().items():
        argv = command(service)
        role = role_of(argv)
        assert role is not None, f"{name} runs {argv}, which is none of Belvedere's entry points"
        if name in ("web", "worker", "beat", "migrate"):
            assert role == name, f"service {name} runs the {role} entry point"
        check_process_flags(role, argv)
    assert option(command(services()["web"]), "--bind") == "0.0.0.0:8000"


def test_one_shot_services_do_not_restart_and_the_processes_wait_for_migrate():
    app = app_services()
    for name, service in app.items():
        if role_of(command(service)) in ("migrate", "collectstatic"):
            # `restart: unless-stopped` would rerun a finished job forever and it would never count
            # as "completed successfully".
            assert str(service.get("restart")) in ("no", "False"), f"{name} is a one-shot job"
    for name in PROCESSES:
        assert depends_on(app[name]).get("migrate") == "service_completed_successfully", name


def test_compose_passes_only_documented_settings_to_the_app():
    documented = env_example()
    for name, service in app_services().items():
        undocumented = set(environment(service)) - set(documented)
        assert not undocumented, f"{name} gets {sorted(undocumented)}, which deploy/env.example does not document"
        env_files = service.get("env_file") or []
        for env_file in [env_files] if isinstance(env_files, str) else env_files:
            path = env_file if isinstance(env_file, str) else env_file["path"]
            # Only the operator's copy of env.example, next to docker-compose.yml (git-ignored).
            assert (DEPLOY / path).resolve() == (DEPLOY / ".env").resolve(), path


def test_processes_get_the_required_settings_and_the_production_profile():
    for name in PROCESSES:
        env = environment(services()[name])
        for variable in REQUIRED:
            assert env.get(variable, "").strip(), f"{name} does not get {variable}"
        assert env.get("DJANGO_SETTINGS_MODULE") == "portal.settings.production", name
        if env.get("TELEMETRY_BACKEND", "elasticsearch") == "elasticsearch":
            assert env.get("ELASTICSEARCH_URL", "").strip(), f"{name} needs ELASTICSEARCH_URL"


def test_service_urls_point_at_services_of_the_stack():
    stack = services()
    env = environment(stack["web"])
    expected = {"DATABASE_URL": "postgres", "CELERY_BROKER_URL": "redis", "ELASTICSEARCH_URL": "elasticsearch"}
    for variable, service in expected.items():
        url = urlsplit(fill_placeholders(env[variable]))
        assert url.hostname == service, f"{variable} points at {url.hostname!r}"
        assert url.hostname in stack
    # The app's database credentials are the ones PostgreSQL is initialised with.
    database = urlsplit(fill_placeholders(env["DATABASE_URL"]))
    postgres = environment(stack["postgres"])
    assert database.username == postgres["POSTGRES_USER"]
    assert database.path.lstrip("/") == postgres["POSTGRES_DB"]
    assert INTERPOLATION.findall(env["DATABASE_URL"]) == INTERPOLATION.findall(postgres["POSTGRES_PASSWORD"])


def test_compose_environment_satisfies_the_production_profile():
    """Load the production settings (nothing more) in a subprocess with web's environment."""
    env = {key: value for key, value in os.environ.items() if key in ("PATH", "HOME", "LANG", "SYSTEMROOT")}
    env.update({key: fill_placeholders(value) for key, value in environment(services()["web"]).items()})
    assert env["SECRET_KEY"] == "placeholder"  # what deploy/.env gives: a key the profile accepts, as an operator makes it
    env["SECRET_KEY"] = secrets.token_urlsafe(50)
    code = "from django.conf import settings; print(settings.BELVEDERE_PROFILE, settings.TELEMETRY_BACKEND)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["production", "elasticsearch"]


def test_depends_on_names_existing_services_that_can_report_health():
    stack = services()
    image_has_healthcheck = any(keyword == "HEALTHCHECK" for keyword, _ in final_stage())
    for name, service in stack.items():
        for dependency, condition in depends_on(service).items():
            assert dependency in stack, f"{name} depends on unknown service {dependency}"
            assert dependency != name
            if condition == "service_healthy":
                healthcheck = stack[dependency].get("healthcheck") or {}
                assert not healthcheck.get("disable"), (
                    f"{name} waits for {dependency} to be healthy, which has no check"
                )
                assert healthcheck.get("test") or (is_app_service(stack[dependency]) and image_has_healthcheck), (
                    dependency
                )


def test_web_healthcheck_probes_healthz():
    test = services()["web"]["healthcheck"]["test"]
    assert "/healthz" in " ".join(test if isinstance(test, list) else [test])
    for name in ("postgres", "redis", "elasticsearch"):
        assert services()[name]["healthcheck"]["test"], name


def test_only_nginx_is_published():
    # Elasticsearch runs without authentication inside the stack: it must never get a host port.
    published = {name for name, service in services().items() if service.get("ports")}
    assert published == {"nginx"}


def test_nginx_service_mounts_the_deploy_files():
    stack = services()
    volumes = {target: (source, read_only) for source, target, read_only in mounts(stack["nginx"])}
    source, read_only = volumes["/etc/nginx/nginx.conf"]
    assert (DEPLOY / source).resolve() == (DEPLOY / "nginx.conf").resolve()
    assert read_only
    assert "/etc/nginx/certs" in volumes and volumes["/etc/nginx/certs"][1]
    # nginx serves /static/ from the volume that collectstatic fills at the image's STATIC_ROOT.
    static_alias = next(d for d in find(nginx_tree(), "location") if d[1] == ["/static/"])
    alias = first_args(static_alias[2], "alias")[0].rstrip("/")
    nginx_static = [source for source, target, _ in mounts(stack["nginx"]) if target.rstrip("/") == alias]
    assert nginx_static, f"nginx does not mount anything at {alias}"
    collectors = [service for service in app_services().values() if role_of(command(service)) == "collectstatic"]
    assert collectors, "nothing fills the static volume"
    for service in collectors:
        assert (nginx_static[0], image_env()["STATIC_ROOT"], False) in mounts(service)
    assert nginx_static[0] in compose()["volumes"]


# ---------------------------------------------------------------------------------------------
# Dockerfile
# ---------------------------------------------------------------------------------------------
def test_dockerfile_starts_from_python_311_slim():
    instructions = dockerfile()
    assert instructions[0][0] == "FROM"
    for keyword, args in instructions:
        if keyword == "FROM":
            assert args.split()[0].startswith("python:3.11-slim"), args


def test_dockerfile_runs_as_a_non_root_user():
    users = [args.split(":")[0] for keyword, args in final_stage() if keyword == "USER"]
    assert users, "the image runs as root"
    assert users[-1] not in ("root", "0")
    keywords = [keyword for keyword, _ in final_stage()]
    assert keywords.index("USER") < keywords.index("CMD")


def test_dockerfile_exposes_8000_and_runs_gunicorn():
    stage = final_stage()
    exposed = [args.split() for keyword, args in stage if keyword == "EXPOSE"]
    assert ["8000"] in exposed
    cmd = exec_form([args for keyword, args in stage if keyword == "CMD"][-1])
    assert cmd[:2] == ["gunicorn", "portal.wsgi"]
    assert role_of(cmd) == "web"
    check_process_flags("web", cmd)
    assert option(cmd, "--bind") == "0.0.0.0:8000"
    assert image_env()["DJANGO_SETTINGS_MODULE"] == "portal.settings.production"


def test_dockerfile_healthcheck_probes_healthz_with_a_script_in_the_image():
    checks = [args for keyword, args in final_stage() if keyword == "HEALTHCHECK"]
    assert len(checks) == 1
    _options, _, probe = checks[0].partition("CMD ")
    assert "/healthz" in probe
    argv = exec_form(probe)
    scripts = [PurePosixPath(arg) for arg in argv if arg.endswith(".py")]
    for script in scripts:
        assert script in image_files(), f"{script} is not copied into the image"
        assert image_files()[script].is_file()


def test_dockerfile_copies_only_existing_paths():
    for keyword, args in dockerfile():
        if keyword not in ("COPY", "ADD") or "--from" in args:
            continue
        *sources, _ = [token for token in shlex.split(args) if not token.startswith("--")]
        for source in sources:
            if any(char in source for char in "*?[$"):
                continue
            assert (REPO / source).exists(), f"COPY {source}: not in the repository"
    copied = {path.relative_to(REPO).parts[0] for path in image_files().values()}
    # What the processes import or read at run time.
    assert {"manage.py", "portal", "apps", "templates", "static"} <= copied
    assert not copied & {".venv", "var", "test-artifacts", ".git", "staticfiles"}


def test_dockerfile_bakes_no_settings_secrets():
    for keyword, args in dockerfile():
        if keyword in ("ENV", "ARG"):
            names = {token.split("=", 1)[0] for token in shlex.split(args)}
            assert not names & {"SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "OIDC_RP_CLIENT_SECRET"}, args


def collectstatic_run() -> str:
    runs = [args for keyword, args in final_stage() if keyword == "RUN" and "collectstatic" in args]
    assert len(runs) == 1
    return runs[0]


def test_build_time_collectstatic_works_with_the_dockerfile_environment(tmp_path):
    """Run the Dockerfile's collectstatic line with exactly its environment (ENV + RUN-scoped)."""
    run = shlex.split(collectstatic_run())
    assignments = {}
    while run and re.match(r"^[A-Z_][A-Z0-9_]*=", run[0]):
        name, _, value = run.pop(0).partition("=")
        assignments[name] = value
    assert run == ["python", "manage.py", "collectstatic", "--noinput"]
    # A random key made for this one command (the production profile refuses a placeholder or a short key).
    assert assignments["SECRET_KEY"] == "$(python -c 'import secrets; print(secrets.token_urlsafe(50))')"
    assignments["SECRET_KEY"] = subprocess.run([sys.executable, "-c", assignments["SECRET_KEY"][13:-2]], capture_output=True,
                                               text=True, check=True).stdout.strip()
    assert assignments["DJANGO_SETTINGS_MODULE"] == "portal.settings.production"

    env = {key: value for key, value in os.environ.items() if key in ("PATH", "HOME", "LANG", "SYSTEMROOT")}
    env.update({key: value for key, value in image_env().items() if key != "PATH"})
    env.update(assignments)
    env["STATIC_ROOT"] = str(tmp_path / "static")  # instead of /app/staticfiles
    env["BELVEDERE_DATA_DIR"] = str(tmp_path / "var")
    # sqlite:////tmp/build.sqlite3 -> /tmp/build.sqlite3 (three slashes would make it relative).
    database = REPO / urlsplit(assignments["DATABASE_URL"]).path[1:]
    database_existed = database.exists()
    result = subprocess.run(
        [sys.executable, *run[1:]], cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "static" / "staticfiles.json").is_file()
    # The dummy database is never touched, and nothing is written to the data directory.
    assert database.exists() == database_existed
    assert not (tmp_path / "var").exists()


# ---------------------------------------------------------------------------------------------
# systemd units
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("process", PROCESSES)
def test_unit_has_the_sections_and_runs_from_the_venv(process):
    unit = read_unit(UNITS[process])
    assert {"Unit", "Service", "Install"} <= set(unit.sections())
    argv = shlex.split(unescape_specifiers(exec_start(UNITS[process])))
    assert PurePosixPath(argv[0]).parent == VENV_BIN, argv[0]
    assert role_of(argv) == process, argv
    check_process_flags(process, argv)
    assert unit["Service"]["WorkingDirectory"] == "/opt/belvedere"
    assert unit["Service"]["User"] == "belvedere"


@pytest.mark.parametrize("process", PROCESSES)
def test_unit_settings_and_restart_policy(process):
    service = read_unit(UNITS[process])["Service"]
    # No leading "-": a missing settings file must fail the start, not run on defaults.
    assert service["EnvironmentFile"] == "/etc/belvedere/env"
    assert service["Restart"] == "on-failure"
    assert "78" in service["RestartPreventExitStatus"].split()
    defaults = dict(value.split("=", 1) for value in unit_values(UNITS[process], "Service", "Environment"))
    assert defaults.get("DJANGO_SETTINGS_MODULE") == "portal.settings.production"
    # ${VAR} in ExecStart becomes an empty argument when unset: each needs a default here.
    for variable in INTERPOLATION.findall(exec_start(UNITS[process])):
        assert variable in defaults, f"ExecStart uses ${{{variable}}} without an Environment= default"
        assert variable in env_example(), f"{variable} is not documented in deploy/env.example"


@pytest.mark.parametrize("process", PROCESSES)
def test_unit_hardening(process):
    service = read_unit(UNITS[process])["Service"]
    assert service["NoNewPrivileges"] == "true"
    assert service["PrivateTmp"] == "true"
    assert service["ProtectSystem"] == "strict"
    assert "/opt/belvedere/var" in service["ReadWritePaths"].split()


def test_worker_hostname_reaches_celery_unexpanded():
    argv = shlex.split(unescape_specifiers(exec_start(UNITS["worker"])))
    assert option(argv, "--hostname") == "worker@%h"


def test_target_groups_the_three_units():
    target = read_unit(SYSTEMD / "belvedere.target")
    wanted = target["Unit"]["Wants"].split()
    assert sorted(wanted) == sorted(path.name for path in UNITS.values())
    for path in UNITS.values():
        unit = read_unit(path)
        assert unit["Unit"]["PartOf"] == "belvedere.target"
        assert unit["Install"]["WantedBy"] == "belvedere.target"


def test_web_unit_binds_where_nginx_can_reach_it():
    defaults = dict(value.split("=", 1) for value in unit_values(UNITS["web"], "Service", "Environment"))
    assert "${BELVEDERE_BIND}" in exec_start(UNITS["web"])
    assert defaults["BELVEDERE_BIND"] == "127.0.0.1:8000"
    assert "BELVEDERE_BIND" in env_example()


# ---------------------------------------------------------------------------------------------
# nginx.conf
# ---------------------------------------------------------------------------------------------
def test_nginx_conf_is_a_complete_balanced_config():
    tree = nginx_tree()  # asserts that braces balance outside comments and strings
    names = [directive[0] for directive in tree]
    assert "events" in names and "http" in names
    assert "listen 443 ssl" in (DEPLOY / "nginx.conf").read_text()


def test_nginx_proxies_to_the_web_service():
    http = next(d for d in nginx_tree() if d[0] == "http")[2]
    upstreams = {d[1][0]: d[2] for d in http if d[0] == "upstream"}
    passes = [d[1][0] for d in find(http, "proxy_pass")]
    assert passes, "no proxy_pass"
    for target in passes:
        name = urlsplit(target).hostname
        assert name in upstreams, f"proxy_pass to {target}, which is no upstream"
        servers = [d[1][0] for d in upstreams[name] if d[0] == "server"]
        assert servers == ["web:8000"]
        assert "web" in services()


def test_nginx_forwards_the_headers_django_relies_on():
    locations = [d for d in find(nginx_tree(), "location") if d[2] and find(d[2], "proxy_pass")]
    assert locations
    for location in locations:
        headers = {d[1][0].lower(): d[1][1] for d in location[2] if d[0] == "proxy_set_header"}
        # SECURE_PROXY_SSL_HEADER = ('HTTP_X_FORWARDED_PROTO', 'https')
        assert headers["x-forwarded-proto"] in ("https", "$scheme")
        assert headers["host"] in ("$host", "$http_host")
        assert "x-forwarded-for" in headers


def test_nginx_tls_and_redirect():
    servers = find(nginx_tree(), "server")
    servers = [s for s in servers if s[2] is not None]  # blocks, not upstream `server` lines
    tls = [s for s in servers if any("443" in d[1][0] and "ssl" in d[1] for d in s[2] if d[0] == "listen")]
    assert len(tls) == 1
    for directive in ("ssl_certificate", "ssl_certificate_key"):
        assert first_args(tls[0][2], directive)[0].startswith("/etc/nginx/certs/")
    assert set(first_args(tls[0][2], "ssl_protocols")) <= {"TLSv1.2", "TLSv1.3"}
    plain = [s for s in servers if any(d[1][0].split(":")[-1] == "80" for d in s[2] if d[0] == "listen")]
    assert len(plain) == 1
    returns = [d[1] for d in find(plain[0][2], "return")]
    assert ["301", "https://$host$request_uri"] in returns


def test_nginx_body_limit_matches_the_upload_limit():
    http = next(d for d in nginx_tree() if d[0] == "http")[2]
    limit = size_in_bytes(first_args(http, "client_max_body_size")[0])
    django_limit = int(env_example()["DATA_UPLOAD_MAX_MEMORY_SIZE"])
    assert django_limit == 10 * 1024 * 1024
    # At least Django's limit (so Django, not nginx, answers just-too-large bodies), at most a
    # little more (nginx still stops the really large ones).
    assert django_limit <= limit <= django_limit + 2 * 1024 * 1024


def test_nginx_serves_static_with_long_caching_and_compresses_text():
    tree = nginx_tree()
    static = [d for d in find(tree, "location") if d[1] == ["/static/"]]
    assert len(static) == 1
    cache_headers = [d[1][1] for d in find(static[0][2], "add_header") if d[1][0].lower() == "cache-control"]
    assert any("max-age=31536000" in value and "immutable" in value for value in cache_headers)
    http = next(d for d in tree if d[0] == "http")[2]
    assert first_args(http, "gzip") == ["on"]
    gzip_types = set(first_args(http, "gzip_types"))
    assert {"application/json", "text/css", "image/svg+xml"} <= gzip_types
    assert gzip_types & {"application/javascript", "text/javascript"}


def test_nginx_static_pattern_matches_manifest_names():
    # ManifestStaticFilesStorage inserts 12 hex digits: css/belvedere.01a221bdabb9.css
    static = next(d for d in find(nginx_tree(), "location") if d[1] == ["/static/"])
    hashed = [d for d in static[2] if d[0] == "location" and d[1][0] == "~"]
    assert hashed
    pattern = re.compile(hashed[0][1][1].replace("(?<", "(?P<"))
    assert pattern.match("/static/css/belvedere.01a221bdabb9.css")
    assert pattern.match("/static/admin/js/vendor/select2/i18n/ru.934aa95f5b5f.js")
    assert not pattern.match("/static/css/belvedere.css")


# ---------------------------------------------------------------------------------------------
# Module paths and the health probe
# ---------------------------------------------------------------------------------------------
def module_file(dotted: str) -> Path:
    path = REPO.joinpath(*dotted.split("."))
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"


def test_referenced_python_modules_exist():
    modules = {"portal.wsgi", "portal.celery"}  # gunicorn portal.wsgi; celery -A portal loads portal.celery
    modules.add(image_env()["DJANGO_SETTINGS_MODULE"])
    for name in PROCESSES:
        modules.add(environment(services()[name])["DJANGO_SETTINGS_MODULE"])
        defaults = dict(value.split("=", 1) for value in unit_values(UNITS[name], "Service", "Environment"))
        modules.add(defaults["DJANGO_SETTINGS_MODULE"])
    for dotted in modules:
        assert module_file(dotted).is_file(), f"{dotted} does not exist in the repository"
    assert (REPO / "manage.py").is_file() and (REPO / "requirements.txt").is_file()
    requirements = (REPO / "requirements.txt").read_text().lower()
    for package in ("gunicorn", "celery", "psycopg", "redis", "whitenoise", "django-celery-beat"):
        assert re.search(rf"^{re.escape(package)}(\[.*\])?==", requirements, re.MULTILINE), package


class _Recorder(http.server.BaseHTTPRequestHandler):
    answers: ClassVar[dict[str, tuple[int, dict]]] = {}
    seen: ClassVar[list[dict]] = []

    def do_GET(self):  # http.server's naming
        type(self).seen.append({"path": self.path, **{key.lower(): value for key, value in self.headers.items()}})
        status, headers = self.answers.get(self.path, (404, {}))
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def probe_server():
    _Recorder.seen = []
    _Recorder.answers = {
        "/healthz": (200, {}),
        "/redirects": (301, {"Location": "https://belvedere.example.org/redirects"}),
        "/broken": (500, {}),
    }
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def run_probe(url: str, allowed_hosts: str | None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "ALLOWED_HOSTS"}
    if allowed_hosts is not None:
        env["ALLOWED_HOSTS"] = allowed_hosts
    return subprocess.run(
        [sys.executable, str(DEPLOY / "healthcheck.py"), url],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_health_probe_presents_itself_like_nginx(probe_server):
    result = run_probe(f"{probe_server}/healthz", " .belvedere.example.org, other.example.org")
    assert result.returncode == 0, result.stdout + result.stderr
    request = _Recorder.seen[-1]
    # What production needs: an allowed Host (no SSL redirect, no DisallowedHost) and HTTPS.
    assert request["host"] == "belvedere.example.org"
    assert request["x-forwarded-proto"] == "https"
    assert run_probe(f"{probe_server}/healthz", "*").returncode == 0
    assert _Recorder.seen[-1]["host"] == "localhost"


@pytest.mark.parametrize(
    "path, reason", [("/redirects", "redirected (301)"), ("/broken", "answered 500"), ("/missing", "answered 404")]
)
def test_health_probe_fails_on_anything_but_200(probe_server, path, reason):
    result = run_probe(f"{probe_server}{path}", "belvedere.example.org")
    assert result.returncode == 1
    assert result.stdout.startswith("unhealthy:") and reason in result.stdout, result.stdout
    assert len(_Recorder.seen) == 1  # a redirect is reported, not followed


def test_health_probe_fails_when_nothing_listens():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = run_probe(f"http://127.0.0.1:{port}/healthz", "belvedere.example.org")
    assert result.returncode == 1
    assert "unreachable" in result.stdout


def test_health_probe_default_targets_the_exposed_port():
    source = (DEPLOY / "healthcheck.py").read_text()
    default = re.search(r'^DEFAULT_URL = "([^"]+)"', source, re.MULTILINE).group(1)
    assert urlsplit(default).port == 8000 and urlsplit(default).path == "/healthz"
