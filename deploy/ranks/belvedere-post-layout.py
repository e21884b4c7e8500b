#!/usr/bin/env python3
"""belvedere-post-layout.py: post a Megatron-LM job's parallel sizes and exact rank map to Belvedere.

Run it in every task of the training step, next to the training process. Every task writes
<dir>/rank-<RANK>.json (its host and local rank); task 0 waits until all WORLD_SIZE files are
there (at most --timeout seconds), then sends

    PUT <portal>/api/v1/jobs/<cluster>/<job id>/layout/
    Authorization: JobToken <the job's token>
    {"tp": 4, "pp": 8, "cp": 1, "ep": 1, "dp": 16, "vpp": null, "order": "tp-cp-ep-dp-pp",
     "ranks": [{"rank": 0, "host": "nid006000", "local_rank": 0}, ...]}

The portal and cluster come from BELVEDERE_JOB_URL (https://<portal>/jobs/<cluster>/<job id>/) and
the token from the file named by BELVEDERE_JOB_TOKEN_FILE; the portal's Slurm TaskProlog exports
both into every task of a job that has a token (deploy/slurm/README.md).

Typical use, in the batch script (4 tasks per node; the script returns at once in tasks other
than 0, and in task 0 after posting, so it can also run in the foreground):

    MEGATRON_ARGS="--tensor-model-parallel-size 4 --pipeline-model-parallel-size 8 ..."
    srun -l bash -c '
        export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS
        python3 /opt/belvedere/belvedere-post-layout.py --from-args-of "$MEGATRON_ARGS" &
        exec python pretrain_gpt.py $MEGATRON_ARGS'

or with explicit sizes: belvedere-post-layout.py --tp 4 --pp 8 [--cp 1 --ep 1 --vpp 2 ...].

Sizes: --tp/--pp/--cp/--ep/--etp/--vpp/--num-layers/--first-stage-layers/--last-stage-layers
and --order (or --use-tp-pp-dp-mapping), or --from-args-of "<the Megatron command line>", which
reads --tensor-model-parallel-size, --pipeline-model-parallel-size, --context-parallel-size,
--expert-model-parallel-size, --expert-tensor-parallel-size, --virtual-pipeline-model-parallel-size,
--num-layers-per-virtual-pipeline-stage, --num-layers, --decoder-first/last-pipeline-num-layers and
--use-tp-pp-dp-mapping (Megatron's defaults for the others); explicit flags win. dp is
WORLD_SIZE / (tp*pp*cp).

Environment: RANK (else SLURM_PROCID), WORLD_SIZE (else SLURM_NTASKS, SLURM_NPROCS), LOCAL_RANK
and SLURM_LOCALID (the local rank is LOCAL_RANK; where LOCAL_RANK repeats on a node, as with
--gpus-per-task=1 and LOCAL_RANK=0, SLURM_LOCALID), SLURMD_NODENAME (the host; else the short host
name), BELVEDERE_JOB_URL, BELVEDERE_JOB_TOKEN_FILE, and for the default --dir
$SLURM_SUBMIT_DIR/.belvedere-ranks-$SLURM_JOB_ID (a directory all tasks can reach; it is removed
once the layout is posted).

It never breaks the training job: on any problem it prints one line on stderr and exits 0
(with --strict: 1, and 2 for bad options). --dry-run prints the JSON body on stdout instead of
sending it (no URL or token needed). Standard library only; Python 3.8 or newer.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

PROG = "belvedere-post-layout"
ORDERS = ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp")
HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
JOB_PATH_RE = re.compile(
    r"^(?P<prefix>.*?)/jobs/(?P<cluster>[A-Za-z0-9][A-Za-z0-9_-]{0,63})/(?P<job>[1-9][0-9]{0,11})/?$"
)
RANK_FILE_RE = re.compile(r"^rank-(\d+)\.json$")
MAX_LOCAL_RANK = 63
RETRY_STATUSES = (429, 502, 503, 504)

# Megatron's flag -> (our key, kind); kind "int" or "flag".
MEGATRON_FLAGS = {
    "--tensor-model-parallel-size": ("tp", "int"),
    "--pipeline-model-parallel-size": ("pp", "int"),
    "--context-parallel-size": ("cp", "int"),
    "--expert-model-parallel-size": ("ep", "int"),
    "--expert-tensor-parallel-size": ("etp", "int"),
    "--virtual-pipeline-model-parallel-size": ("vpp", "int"),
    "--num-layers-per-virtual-pipeline-stage": ("layers_per_virtual_stage", "int"),
    "--num-layers": ("num_layers", "int"),
    "--decoder-first-pipeline-num-layers": ("first_stage_layers", "int"),
    "--decoder-last-pipeline-num-layers": ("last_stage_layers", "int"),
    "--use-tp-pp-dp-mapping": ("tp_pp_dp_mapping", "flag"),
}
SIZE_OPTIONS = ("tp", "pp", "cp", "ep", "etp", "vpp", "num_layers", "first_stage_layers", "last_stage_layers")


class Failure(Exception):
    """Something that stops the posting; the message is the one line printed."""


class UsageError(Failure):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):  # never exit 2 from inside a job unless --strict
        raise UsageError(f"{message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="belvedere-post-layout.py", description="Post a Megatron-LM job's rank map to Belvedere "
                    "(run it in every task; task 0 posts).", epilog="See the top of the script for the details.")
    sizes = parser.add_argument_group("sizes")
    for name, help_text in (("tp", "tensor-model-parallel size"), ("pp", "pipeline-model-parallel size"),
                            ("cp", "context-parallel size (default 1)"),
                            ("ep", "expert-model-parallel size (default 1)"),
                            ("etp", "expert-tensor-parallel size (default: tp)"),
                            ("vpp", "virtual pipeline stages per pipeline rank (interleaved schedule)"),
                            ("num-layers", "number of transformer layers"),
                            ("first-stage-layers", "--decoder-first-pipeline-num-layers"),
                            ("last-stage-layers", "--decoder-last-pipeline-num-layers")):
        sizes.add_argument(f"--{name}", type=int, metavar="N", help=help_text)
    sizes.add_argument("--order", choices=ORDERS, help="Megatron's order string (default tp-cp-ep-dp-pp)")
    sizes.add_argument("--use-tp-pp-dp-mapping", action="store_true", help="same as --order tp-cp-ep-pp-dp")
    sizes.add_argument("--from-args-of", action="append", metavar="COMMAND", default=[],
                       help="the Megatron command line (or its arguments) to read the sizes from")
    parser.add_argument("--dir", help="rendezvous directory shared by all tasks "
                        "(default $SLURM_SUBMIT_DIR/.belvedere-ranks-$SLURM_JOB_ID)")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                        help="how long task 0 waits for the other tasks' files (default 120)")
    parser.add_argument("--http-timeout", type=float, default=20.0, metavar="SECONDS",
                        help="timeout of one HTTP request (default 20; one retry on 429/5xx or no connection)")
    parser.add_argument("--hostname", help="this task's host (default $SLURMD_NODENAME, else the short host name)")
    parser.add_argument("--url", help="the job's Belvedere URL (default $BELVEDERE_JOB_URL)")
    parser.add_argument("--token-file", help="the job token's file (default $BELVEDERE_JOB_TOKEN_FILE)")
    parser.add_argument("--dry-run", action="store_true", help="task 0 prints the JSON body instead of sending it")
    parser.add_argument("--strict", action="store_true", help="exit 1 on errors (default: always exit 0)")
    return parser


# --------------------------------------------------------------------------------------------
# Sizes
# --------------------------------------------------------------------------------------------
def read_megatron_args(command: str) -> dict:
    """The sizes given on a Megatron command line; flags it does not give are left out."""
    try:
        tokens = shlex.split(command)
    except ValueError as error:
        raise UsageError(f"--from-args-of: cannot split {command[:80]!r}: {error}") from None
    found: dict = {}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        name, equals, value = token.partition("=")
        if name not in MEGATRON_FLAGS:
            continue
        key, kind = MEGATRON_FLAGS[name]
        if kind == "flag":
            found[key] = True
            continue
        if not equals:
            if index >= len(tokens):
                raise UsageError(f"--from-args-of: {name} has no value")
            value = tokens[index]
            index += 1
        if not value.isdigit():
            raise UsageError(f"--from-args-of: {name} is {value!r}, not a whole number (unexpanded variable?)")
        found[key] = int(value)
    return found


def resolve_sizes(options: argparse.Namespace, world_size: int) -> dict:
    given = {key: getattr(options, key) for key in SIZE_OPTIONS if getattr(options, key) is not None}
    if not given and not options.from_args_of and not options.order and not options.use_tp_pp_dp_mapping:
        raise UsageError("no sizes: give --tp and --pp (and --cp, --ep, --vpp ...) or --from-args-of "
                         "\"<the Megatron command line>\"")
    values: dict = {}
    for command in options.from_args_of:
        values.update(read_megatron_args(command))
    values.update(given)
    for key, value in values.items():
        minimum = 0 if key in ("first_stage_layers", "last_stage_layers") else 1
        if isinstance(value, int) and not isinstance(value, bool) and value < minimum:
            raise UsageError(f"{key} is {value}; it must be at least {minimum}")
    tp, pp, cp, ep = values.get("tp", 1), values.get("pp", 1), values.get("cp", 1), values.get("ep", 1)
    etp = values.get("etp")
    if options.order:
        order = options.order
    elif options.use_tp_pp_dp_mapping or values.get("tp_pp_dp_mapping"):
        order = ORDERS[1]
    else:
        order = ORDERS[0]
    if world_size % (tp * pp * cp):
        raise Failure(f"the world size {world_size} is not a multiple of tp*pp*cp = {tp}*{pp}*{cp} = {tp * pp * cp}")
    if world_size % (ep * (etp or tp) * pp):
        raise Failure(f"the world size {world_size} is not a multiple of ep*etp*pp = {ep}*{etp or tp}*{pp}")
    vpp = values.get("vpp")
    if vpp is None and values.get("layers_per_virtual_stage"):
        if not values.get("num_layers"):
            raise UsageError("--num-layers-per-virtual-pipeline-stage needs --num-layers to work out vpp")
        vpp = (values["num_layers"] // pp) // values["layers_per_virtual_stage"]
    sizes = {"tp": tp, "pp": pp, "cp": cp, "ep": ep}
    if etp is not None:
        sizes["etp"] = etp
    sizes.update({"dp": world_size // (tp * pp * cp), "vpp": vpp, "order": order})
    for key in ("num_layers", "first_stage_layers", "last_stage_layers"):
        if values.get(key) is not None:
            sizes[key] = values[key]
    return sizes


# --------------------------------------------------------------------------------------------
# This task
# --------------------------------------------------------------------------------------------
def env_int(env: dict, names: tuple, what: str, required: bool = True):
    for name in names:
        value = env.get(name, "").strip()
        if value:
            if not value.isdigit():
                raise Failure(f"{name} is {value!r}, not a whole number")
            return int(value), name
    if required:
        raise Failure(f"{' and '.join(names)} are unset: {what}")
    return None, None


def this_task(options: argparse.Namespace, env: dict) -> dict:
    rank, _ = env_int(env, ("RANK", "SLURM_PROCID"), "run this in the job's tasks (srun ...), which set them")
    world_size, world_name = env_int(env, ("WORLD_SIZE", "SLURM_NTASKS", "SLURM_NPROCS"),
                                     "run this in the job's tasks (srun ...), which set them")
    if world_size < 1 or rank >= world_size:
        raise Failure(f"rank {rank} is not below the world size {world_size} ({world_name})")
    local_rank, _ = env_int(env, ("LOCAL_RANK",), "", required=False)
    slurm_localid, _ = env_int(env, ("SLURM_LOCALID",), "", required=False)
    if local_rank is None and slurm_localid is None:
        raise Failure("LOCAL_RANK and SLURM_LOCALID are unset: run this in the job's tasks (srun ...), which set them")
    host = options.hostname or env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    if not HOST_RE.match(host):
        raise Failure(f"the host name {host!r} is not one the portal accepts ([A-Za-z0-9_.-], at most 64 characters)")
    tag = ".".join(env.get(name, "") for name in ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_RESTART_COUNT"))
    return {"tag": tag, "rank": rank, "world_size": world_size, "host": host,
            "local_rank": local_rank if local_rank is not None else slurm_localid, "slurm_localid": slurm_localid}


def rendezvous_dir(options: argparse.Namespace, env: dict) -> str:
    if options.dir:
        return options.dir
    submit_dir, job_id = env.get("SLURM_SUBMIT_DIR"), env.get("SLURM_JOB_ID")
    if not submit_dir or not job_id:
        raise UsageError("--dir is needed outside a Slurm job (SLURM_SUBMIT_DIR or SLURM_JOB_ID is unset)")
    return os.path.join(submit_dir, f".belvedere-ranks-{job_id}")


def write_rank_file(directory: str, task: dict) -> None:
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        final = os.path.join(directory, f"rank-{task['rank']}.json")
        temporary = os.path.join(directory, f".rank-{task['rank']}.json.{os.getpid()}.tmp")
        with open(temporary, "w") as handle:
            json.dump(task, handle)
        os.replace(temporary, final)  # atomic: task 0 never reads half a file
    except OSError as error:
        raise Failure(f"cannot write this task's file in {directory}: {error.strerror or error}") from None


# --------------------------------------------------------------------------------------------
# Task 0
# --------------------------------------------------------------------------------------------
def api_url(job_url: str, env: dict) -> str:
    if not job_url:
        raise Failure("BELVEDERE_JOB_URL is not set: the portal's TaskProlog exports it when the job has a Belvedere "
                      "token (or give --url https://<portal>/jobs/<cluster>/<job id>/)")
    parts = urllib.parse.urlsplit(job_url.strip())
    match = JOB_PATH_RE.match(parts.path)
    if parts.scheme not in ("http", "https") or not parts.netloc or not match or parts.query or parts.fragment:
        raise Failure(f"BELVEDERE_JOB_URL {job_url[:120]!r} is not a job's page "
                      "(https://<portal>/jobs/<cluster>/<job id>/)")
    job_id = env.get("SLURM_JOB_ID")
    if job_id and job_id != match.group("job"):
        raise Failure(f"BELVEDERE_JOB_URL is the page of job {match.group('job')}, but this is job {job_id}")
    path = f"{match.group('prefix')}/api/v1/jobs/{match.group('cluster')}/{match.group('job')}/layout/"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def read_token(path: str) -> str:
    if not path:
        raise Failure("BELVEDERE_JOB_TOKEN_FILE is not set: the job has no Belvedere token (the portal's Prolog "
                      "gives one; or give --token-file)")
    try:
        with open(path) as handle:
            token = handle.readline().strip()
    except OSError as error:
        raise Failure(f"cannot read the job token from {path}: {error.strerror or error}") from None
    if not token or any(character.isspace() or ord(character) < 33 for character in token):
        raise Failure(f"{path} does not hold a job token")
    return token


def gather(directory: str, me: dict, timeout: float) -> list:
    """Task 0: the files of all ranks of this run (same tag), waiting at most `timeout` seconds."""
    world_size = me["world_size"]
    found = {}
    deadline = time.monotonic() + timeout
    pause = 0.2
    while True:
        try:
            names = os.listdir(directory)
        except OSError as error:
            raise Failure(f"cannot read {directory}: {error.strerror or error}") from None
        for name in names:
            match = RANK_FILE_RE.match(name)
            if not match or int(match.group(1)) in found or int(match.group(1)) >= world_size:
                continue
            try:
                with open(os.path.join(directory, name)) as handle:
                    entry = json.load(handle)
            except (OSError, ValueError):
                continue  # being replaced; read again next round
            if not isinstance(entry, dict) or entry.get("tag") != me["tag"]:
                continue  # a file of an earlier run or step
            if entry.get("rank") != int(match.group(1)) or entry.get("world_size") != world_size:
                raise Failure(f"{os.path.join(directory, name)} is from a task of another world size "
                              f"({entry.get('world_size')}, not {world_size}); was another job step using {directory}?")
            found[entry["rank"]] = entry
        if len(found) == world_size:
            return [found[rank] for rank in range(world_size)]
        if time.monotonic() >= deadline:
            missing = sorted(set(range(world_size)) - set(found))
            shown = ", ".join(str(rank) for rank in missing[:10]) + (", ..." if len(missing) > 10 else "")
            raise Failure(f"only {len(found)} of {world_size} tasks wrote their file to {directory} within "
                          f"{timeout:g} s (missing: {shown}); does every task run this script?")
        time.sleep(pause)
        pause = min(pause * 1.5, 2.0)


def rank_map(entries: list) -> tuple:
    """(ranks, note): local ranks from LOCAL_RANK, or SLURM_LOCALID where LOCAL_RANK repeats on a node."""
    problem = ""
    for field, note in (("local_rank", ""), ("slurm_localid", " (local ranks from SLURM_LOCALID: LOCAL_RANK repeats "
                                                              "on a node)")):
        slots: dict = {}
        problem = ""
        for entry in entries:
            value = entry.get(field)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_LOCAL_RANK:
                problem = f"rank {entry['rank']} has no usable {field} ({value!r})"
                break
            other = slots.setdefault((entry["host"], value), entry["rank"])
            if other != entry["rank"]:
                problem = f"ranks {other} and {entry['rank']} both have local rank {value} on {entry['host']}"
                break
        if not problem:
            return [{"rank": e["rank"], "host": e["host"], "local_rank": e[field]} for e in entries], note
    raise Failure(f"{problem} (with LOCAL_RANK and with SLURM_LOCALID): give each task on a node its own LOCAL_RANK")


def put(url: str, token: str, body: dict, http_timeout: float) -> int:
    payload = json.dumps(body, separators=(",", ":")).encode()
    request = urllib.request.Request(url, data=payload, method="PUT", headers={
        "Authorization": f"JobToken {token}",
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": f"{PROG}/1",
    })
    for attempt in (1, 2):
        try:
            with urllib.request.urlopen(request, timeout=http_timeout) as response:
                return response.status
        except urllib.error.HTTPError as error:
            if error.code in RETRY_STATUSES and attempt == 1:
                time.sleep(2)
                continue
            try:
                detail = error.read(600).decode("utf-8", "replace")
            except Exception:  # noqa: BLE001 - only for the message
                detail = ""
            detail = " ".join(detail.split())[:300]
            raise Failure(f"the portal answered {error.code} {error.reason} to PUT {url}" +
                          (f": {detail}" if detail else "")) from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            if attempt == 1:
                time.sleep(2)
                continue
            reason = getattr(error, "reason", None) or error
            raise Failure(f"could not reach the portal at {url}: {reason}") from None
    raise Failure(f"could not reach the portal at {url}")  # not reached


def cleanup(directory: str, entries: list) -> None:
    for entry in entries:
        try:
            os.remove(os.path.join(directory, f"rank-{entry['rank']}.json"))
        except OSError:
            pass
    try:
        os.rmdir(directory)
    except OSError:
        pass  # not empty (another step's files) or gone


# --------------------------------------------------------------------------------------------
def run(options: argparse.Namespace, env: dict) -> None:
    me = this_task(options, env)
    directory = rendezvous_dir(options, env)
    if me["rank"] != 0:
        write_rank_file(directory, me)
        return
    # Task 0: check what it can before waiting, so that a mistake shows at once.
    sizes = resolve_sizes(options, me["world_size"])
    url = token = None
    if options.dry_run:
        try:
            url = api_url(options.url or env.get("BELVEDERE_JOB_URL", ""), env)
        except Failure:
            url = None
    else:
        url = api_url(options.url or env.get("BELVEDERE_JOB_URL", ""), env)
        token = read_token(options.token_file or env.get("BELVEDERE_JOB_TOKEN_FILE", ""))
    write_rank_file(directory, me)
    entries = gather(directory, me, options.timeout)
    ranks, note = rank_map(entries)
    body = dict(sizes, ranks=ranks)
    if options.dry_run:
        print(json.dumps(body), flush=True)
        say(f"dry run: would PUT {url or '(no usable BELVEDERE_JOB_URL)'} with the layout of {len(ranks)} ranks{note}")
        cleanup(directory, entries)
        return
    try:
        status = put(url, token, body, options.http_timeout)
    finally:
        cleanup(directory, entries)
    say(f"posted the layout of {len(ranks)} ranks (tp {sizes['tp']}, pp {sizes['pp']}, dp {sizes['dp']}, "
        f"cp {sizes['cp']}, ep {sizes['ep']}) to {url}: {status}{note}")


def say(message: str, rank=None) -> None:
    where = f" (rank {rank})" if rank not in (None, "", "0") else ""
    try:
        print(f"{PROG}{where}: {message}", file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001 - a closed stderr must not crash either
        pass


def main(argv=None, env=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    env = dict(os.environ) if env is None else env
    strict = "--strict" in argv
    rank = env.get("RANK") or env.get("SLURM_PROCID")
    try:
        options = build_parser().parse_args(argv)
        run(options, env)
        return 0
    except UsageError as error:
        if strict or rank in (None, "", "0"):  # the other tasks leave it to task 0: one line, not one per task
            say(str(error), rank)
        return 2 if strict else 0
    except Failure as error:
        say(str(error), rank)
        return 1 if strict else 0
    except KeyboardInterrupt:
        say("interrupted", rank)
        return 1 if strict else 0
    except Exception as error:  # noqa: BLE001 - never break the training job
        say(f"unexpected error: {type(error).__name__}: {error}", rank)
        return 1 if strict else 0


if __name__ == "__main__":
    sys.exit(main())
