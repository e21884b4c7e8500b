#!/bin/sh
# belvedere-prolog.sh: Slurm node Prolog that tells Belvedere a job started and stores its job token.
#
# On each allocated node, before the job: POSTs a `start` event to /api/v1/jobs/events/ and asks
# for a job token, which it writes to <BELVEDERE_JOB_TOKEN_DIR>/job-<job id>.token (owned by the
# job's user, mode 600) for the TaskProlog to export; with BELVEDERE_FLIGHTREC_DIR set, makes the
# job's Flight Recorder folder <BELVEDERE_FLIGHTREC_DIR>/<job id> (the job's user's, mode 700);
# then starts belvedere-discovery.sh, if installed. See deploy/slurm/README.md.
#
# Usage: belvedere-prolog.sh [--print | --foreground]
#   (no option)   the Prolog mode: waits at most BELVEDERE_TIMEOUT seconds, always exits 0
#   --print       print the JSON body that would be sent and exit (no network, no token, no files)
#   --foreground  the same work, but exit with the outcome (0: sent; curl's status; 1, 2, 3)
#
# A non-zero Prolog drains the node and requeues the job, so the Prolog mode never fails: no
# `set -e`, every error ends in `exit 0`. Unlike the discovery script it does wait for the portal,
# because the job token must be in its file before the job's first task starts (the TaskProlog
# looks for it then): a portal outage delays each job start by at most BELVEDERE_TIMEOUT seconds
# (default 5), and the job then runs without a token.
#
# POSIX sh (dash, bash, busybox ash): Debian-style nodes run /bin/sh as dash.

# A predictable environment: slurmd starts prologs with a minimal one (no PATH at all in Slurm
# 22.05), and LC_ALL=C keeps the character ranges in patterns below byte ranges.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}
LC_ALL=C
export PATH LC_ALL
umask 022

TAG=belvedere-prolog
# The shared functions: belvedere-common.sh, next to this script (also when it is started through
# a link, as from /etc/slurm/prolog.d/). Root sources only a file of root's that nobody else can
# write; without one the script logs one line and exits 0, as it must never fail a job.
COMMON=$(readlink -f -- "$0" 2>/dev/null) || COMMON=$0
case $COMMON in */*) COMMON=${COMMON%/*}/belvedere-common.sh ;; *) COMMON=./belvedere-common.sh ;; esac
# (Owner uid 0 and no write bits for group or others; `sh -n` first, as a syntax error while
# sourcing would end this shell with a failure.)
# shellcheck source=SCRIPTDIR/belvedere-common.sh
case $(id -u):$(stat -L -c '%u:%a' "$COMMON" 2>/dev/null) in
    0:0:*[0145][0145] | [1-9]*:*:*) sh -n "$COMMON" 2>/dev/null && . "$COMMON" ;;
esac
if ! command -v common_init >/dev/null 2>&1; then
    COMMON="not running: $COMMON is missing, broken, or not root's alone (install it next to the script, owner root, mode 0644)"
    { [ "${BELVEDERE_LOG_STDERR:-0}" != 1 ] && logger -t "$TAG" -p daemon.err -- "$COMMON" 2>/dev/null; } ||
        printf '%s: %s\n' "$TAG" "$COMMON" >&2
    exit 0
fi
common_init prolog
job_patterns
ENDPOINT_PATH=/api/v1/jobs/events/
# Settings that the config file may set; anything else there is ignored (and said so).
# (BELVEDERE_EPILOG_JITTER is the Epilog's; accepted so that both scripts can share one file.)
SETTINGS=$JOB_SETTINGS

CONFIG_FILE=${BELVEDERE_JOBS_CONFIG:-/etc/belvedere/jobs.env}
SHOWN_CHARS='A-Za-z0-9._:/@=+,[]-'

# ---------------------------------------------------------------------------------------------
# Validation: every value that goes into the JSON body either matches a strict pattern or is
# JSON-escaped (the job name), so the body can be built by plain concatenation.
# ---------------------------------------------------------------------------------------------
json_text() {  # any text -> the inside of a JSON string: printable ASCII (tabs and newlines
    # become blanks, other bytes '?'), at most 200 characters, '\' and '"' escaped
    printf '%s' "$1" | tr '\t\n\r' '   ' | tr -c ' -~' '?' | head -c 200 | sed 's/[\\"]/\\&/g'
}

ACCOUNT_RE='[A-Za-z0-9_.-]{1,64}'
# (JOB_ID_RE, CLUSTER_RE, USER_RE, PARTITION_RE, HOSTLIST_RE, DIR_RE, UID_RE, JOB_TOKEN_RE, TOKEN_RE,
# URL_RE: in belvedere-common.sh)

# ---------------------------------------------------------------------------------------------
# Configuration: built-in defaults < /etc/belvedere/jobs.env < the process environment.
# The file is parsed, not sourced: it is read by root on every node before every job, and a
# stray command in it must not run. The environment wins so that an admin can try another URL
# by hand. (The Epilog reads the same file.)
# ---------------------------------------------------------------------------------------------
load_config() {
    # Values from the file stay unexported: the discovery script, started below, reads its own
    # settings (/etc/belvedere/discovery.env) and must not get these by surprise.
    load_config_file
    : "${BELVEDERE_URL:=}"
    : "${BELVEDERE_TOKEN_FILE:=/etc/belvedere/jobs.token}"
    : "${BELVEDERE_CLUSTER:=${SLURM_CLUSTER_NAME:-}}"
    : "${BELVEDERE_JOB_TOKEN_DIR:=/run/belvedere}"
    : "${BELVEDERE_JOB_TOKENS:=1}"
    : "${BELVEDERE_TIMEOUT:=5}"
    : "${BELVEDERE_DISCOVERY_SCRIPT=/etc/slurm/belvedere-discovery.sh}"
    : "${BELVEDERE_LOG_STDERR:=0}"
    job_config_checks
    flightrec_config_checks
}

# ---------------------------------------------------------------------------------------------
# The start event
# ---------------------------------------------------------------------------------------------
build_body() {  # sets BODY, JOB_ID, SUMMARY; fails (with a log line) if there is nothing to report
    JOB_ID=${SLURM_JOB_ID:-${SLURM_JOBID:-}}
    job_is_known || return 1
    user=${SLURM_JOB_USER:-}
    if ! matches "$user" "$USER_RE"; then
        # The portal needs the user of a start event (whose job is it?).
        log warning "$(with_notes "not reporting job $JOB_ID: SLURM_JOB_USER $(shown "$user") is not a user name")"
        return 1
    fi
    SUMMARY="job $JOB_ID on $BELVEDERE_CLUSTER"
    BODY="{\"cluster\":\"$BELVEDERE_CLUSTER\",\"job_id\":$JOB_ID,\"event\":\"start\",\"user\":\"$user\""
    # Slurm 22.05 gives a node Prolog neither the account nor the job name (only
    # PrologSlurmctld has them); they are sent when present, and the sync fills them in.
    if [ -n "${SLURM_JOB_ACCOUNT:-}" ]; then
        if matches "$SLURM_JOB_ACCOUNT" "$ACCOUNT_RE"; then
            BODY="$BODY,\"account\":\"$SLURM_JOB_ACCOUNT\""
        else
            note "SLURM_JOB_ACCOUNT $(shown "$SLURM_JOB_ACCOUNT")"
        fi
    fi
    if [ -n "${SLURM_JOB_NAME:-}" ]; then
        # Chosen by the user: escaped, never trusted.
        BODY="$BODY,\"name\":\"$(json_text "$SLURM_JOB_NAME")\""
    fi
    add_partition_and_nodes
    BODY="$BODY,\"time\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\""
    return 0
}

# ---------------------------------------------------------------------------------------------
# The job's Flight Recorder folder (BELVEDERE_FLIGHTREC_DIR set): where the TaskProlog points
# TORCH_NCCL_DEBUG_INFO_TEMP_FILE, and whose dumps the Epilog posts with the job token
# ---------------------------------------------------------------------------------------------
flightrec_prepare() {  # makes <BELVEDERE_FLIGHTREC_DIR>/<job id>, the job's user's, mode 0700;
    # sets FR_FOLDER; fails with a note
    FR_FOLDER=""
    flightrec_base_usable 1 || return 1
    flightrec_job_ids || return 1
    folder="$FR_BASE/$JOB_ID"
    # Left by an earlier run of this job id on this node (a requeued job whose Epilog could not
    # post): that run's dumps would be taken for this one's.
    if [ -e "$folder" ] || [ -L "$folder" ]; then
        rm -rf -- "$folder" 2>/dev/null
    fi
    # In a directory nobody else can write, the fresh name cannot be raced for.
    if mkdir -m 0700 -- "$folder" 2>/dev/null && chown "$FR_UID:$FR_GID" -- "$folder" 2>/dev/null; then
        FR_FOLDER=$folder
        return 0
    fi
    rm -rf -- "$folder" 2>/dev/null
    note "could not make the Flight Recorder folder $(shown "$folder") for uid $FR_UID"
    return 1
}

# ---------------------------------------------------------------------------------------------
# The job token's file
# ---------------------------------------------------------------------------------------------
token_dir_usable() {  # creates the directory if missing; fails (with a note) if it is not safe
    dir=$BELVEDERE_JOB_TOKEN_DIR
    if ! matches "$dir" "$DIR_RE"; then
        note "BELVEDERE_JOB_TOKEN_DIR $(shown "$dir") is not an absolute path of [A-Za-z0-9._/-]; no job token"
        return 1
    fi
    job_uid=${SLURM_JOB_UID:-}
    if ! matches "$job_uid" "$UID_RE"; then
        note "SLURM_JOB_UID $(shown "$job_uid") is not a uid; no job token"
        return 1
    fi
    if [ ! -e "$dir" ] && [ ! -L "$dir" ]; then
        # shellcheck disable=SC2174  # parents get 0755 too, from the umask
        mkdir -p -m 0755 "$dir" 2>/dev/null
    fi
    # Root writes a file there that the job's user then owns: the directory must be a real
    # directory of ours that nobody else can write, or a user could plant a link or a file.
    if ! own_directory "$dir"; then
        note "job token directory $(shown "$dir") is missing, a link, or not owned by $(id -un 2>/dev/null); no job token"
        return 1
    fi
    mode=$(file_mode "$dir")
    if writable_by_others "$mode"; then
        note "job token directory $(shown "$dir") is writable by group or others (mode $mode); no job token"
        return 1
    fi
    case $mode in
        *[1357]) ;;
        *) note "job token directory $(shown "$dir") (mode $mode) is not searchable by job users, whose TaskProlog will not see the token" ;;
    esac
    return 0
}

write_job_token() {  # $1: the token; sets TOKEN_PATH; fails with a note
    TOKEN_PATH="$dir/job-$JOB_ID.token"
    if [ -d "$TOKEN_PATH" ] && [ ! -L "$TOKEN_PATH" ]; then
        note "$(shown "$TOKEN_PATH") is a directory"
        return 1
    fi
    # A fresh file (mktemp: O_EXCL, mode 600) in the same directory, renamed over the name:
    # nothing is ever opened through an existing name, so no link is followed.
    if ! tmp=$(mktemp "$dir/.job-$JOB_ID.token.XXXXXX" 2>/dev/null); then
        note "cannot create a file in $(shown "$dir")"
        return 1
    fi
    TMP_FILES="$TMP_FILES $tmp"
    if chmod 600 "$tmp" && printf '%s\n' "$1" >"$tmp" && chown "$job_uid" "$tmp"; then
        # rename(2) replaces a link itself, but `mv` would move into a linked directory.
        [ -L "$TOKEN_PATH" ] && rm -f "$TOKEN_PATH"
        if mv -f "$tmp" "$TOKEN_PATH"; then
            return 0
        fi
    fi
    note "could not write $(shown "$TOKEN_PATH")"
    return 1
}

# ---------------------------------------------------------------------------------------------
# Sending
# ---------------------------------------------------------------------------------------------
post() {  # POSTs BODY within BELVEDERE_TIMEOUT seconds in all (one retry); sets ANSWER, CODE,
    # attempt; logs failures; returns curl's status (22 for HTTP >= 400)
    send 1
    status=$?
    case $CODE in 2??) return 0 ;; esac
    send_failed "$status" " within ${BELVEDERE_TIMEOUT}s"
}

run_discovery() {
    # belvedere-discovery.sh, so that one Prolog= line does both. In the Prolog mode it returns
    # at once (it sends from a detached process of its own) and always exits 0; it reads its
    # own settings, /etc/belvedere/discovery.env.
    script=$BELVEDERE_DISCOVERY_SCRIPT
    [ -n "$script" ] || return 0
    case $script in
        /*) ;;
        *) log warning "not starting discovery: BELVEDERE_DISCOVERY_SCRIPT $(shown "$script") is not an absolute path"; return 0 ;;
    esac
    [ -f "$script" ] && [ -x "$script" ] || return 0
    # Root runs it: it must be root's and writable by nobody else, like the Prolog itself.
    mode=$(file_mode "$script")
    if writable_by_others "$mode"; then
        log warning "not starting discovery: $(shown "$script") is writable by group or others (mode $mode)"
        return 0
    fi
    if [ ! -O "$script" ]; then
        log warning "not starting discovery: $(shown "$script") is not owned by $(id -un 2>/dev/null)"
        return 0
    fi
    if [ "$MODE" = foreground ]; then
        "$script" --foreground
    else
        "$script" </dev/null >/dev/null 2>&1
    fi
    return 0
}

# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------
usage() {
    sed -n '2,19s/^# \{0,1\}//p' "$0"
}

for argument in "$@"; do
    case $argument in
        --print) MODE=print ;;
        --foreground) MODE=foreground ;;
        -h | --help) usage; exit 0 ;;
        *) printf '%s: unknown option %s (see --help)\n' "$TAG" "$(shown "$argument")" >&2; finish 2 ;;
    esac
done

load_config

if [ "$MODE" = print ]; then
    # Always exits 0: the body on stdout, or nothing (with the reason on stderr). No files are
    # created, so whether a token would really be asked for is not checked here.
    if build_body; then
        [ "$BELVEDERE_JOB_TOKENS" = 1 ] && BODY="$BODY,\"token\":true"
        printf '%s}\n' "$BODY"
        [ -n "$NOTES" ] && log warning "$(with_notes "start event of $SUMMARY")"
        # Where the job's Flight Recorder dumps would go (checked, nothing made).
        NOTES=""
        if [ -n "$BELVEDERE_FLIGHTREC_DIR" ]; then
            if { [ -e "$BELVEDERE_FLIGHTREC_DIR" ] || ! matches "$BELVEDERE_FLIGHTREC_DIR" "$DIR_RE"; } &&
                ! flightrec_base_usable 0 || ! flightrec_job_ids; then
                log warning "$(with_notes "no Flight Recorder folder would be made")"
            else
                log info "with a job token, would make the Flight Recorder folder $BELVEDERE_FLIGHTREC_DIR/$JOB_ID for uid $FR_UID"
            fi
        fi
    fi
    exit 0
fi

# The start event, in the foreground: the job waits for it (at most BELVEDERE_TIMEOUT seconds).
STATUS=0
report_start() {
    can_send || { STATUS=2; return; }
    build_body || { STATUS=1; return; }
    read_token "not reporting $SUMMARY" || { STATUS=2; return; }
    # Ask for a job token only when there is a safe place to put it.
    want_token=0
    if [ "$BELVEDERE_JOB_TOKENS" = 1 ] && token_dir_usable; then
        want_token=1
        BODY="$BODY,\"token\":true"
    fi
    BODY="$BODY}"
    post || { STATUS=$?; return; }
    outcome="reported $SUMMARY to $(shown "$BELVEDERE_URL"): HTTP $CODE"
    [ "$attempt" -gt 1 ] && outcome="$outcome (second try)"
    if [ "$want_token" = 1 ]; then
        job_token=$(printf '%s' "$ANSWER" | sed -n 's/.*"job_token" *: *"\([^"]*\)".*/\1/p' | head -n 1)
        if ! matches "$job_token" "$JOB_TOKEN_RE"; then
            log warning "$(with_notes "$outcome, but the answer holds no job token")"
            STATUS=3; return
        fi
        if ! write_job_token "$job_token"; then
            log warning "$(with_notes "$outcome, but the job token was not stored")"
            STATUS=3; return
        fi
        outcome="$outcome; job token in $TOKEN_PATH"
        # The dumps go to the portal with the job token: without one, no folder.
        if [ -n "$BELVEDERE_FLIGHTREC_DIR" ] && flightrec_prepare; then
            outcome="$outcome; Flight Recorder folder $FR_FOLDER"
        fi
    fi
    log info "$(with_notes "$outcome")"
}
report_start

# Then the topology discovery, which never waits.
run_discovery
finish "$STATUS"
