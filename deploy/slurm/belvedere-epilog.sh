#!/bin/sh
# belvedere-epilog.sh: Slurm node Epilog that tells Belvedere a job ended and removes its token file.
#
# On each node of the job, after it: deletes <BELVEDERE_JOB_TOKEN_DIR>/job-<job id>.token (left
# by belvedere-prolog.sh) and POSTs an `end` event to /api/v1/jobs/events/ from a detached
# process, so the node is released at once; that process then posts the job's PyTorch Flight
# Recorder dumps, if BELVEDERE_FLIGHTREC_DIR is set and <that dir>/<job id> holds any, with the
# job's token and removes the folder. See deploy/slurm/README.md.
#
# Usage: belvedere-epilog.sh [--print | --foreground]
#   (no option)   the Epilog mode: send in the background, return at once, always exit 0
#   --print       print the JSON body that would be sent and exit; say on stderr which dumps
#                 would be posted (no network, no token, no files changed)
#   --foreground  remove the token file, wait for the POSTs and exit with curl's status for the
#                 end event (also BELVEDERE_EPILOG_FOREGROUND=1)
#
# A non-zero Epilog drains the node, and a slow one holds it, so the Epilog mode never fails and
# never waits: no `set -e`, every error ends in `exit 0`, and the only network I/O (the end event,
# then the dumps) runs detached from slurmd.
#
# POSIX sh (dash, bash, busybox ash): Debian-style nodes run /bin/sh as dash.

# A predictable environment: slurmd starts epilogs with a minimal one (no PATH at all in Slurm
# 22.05), and LC_ALL=C keeps the character ranges in patterns below byte ranges.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}
LC_ALL=C
export PATH LC_ALL
umask 022

TAG=belvedere-epilog
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
common_init epilog
job_patterns
ENDPOINT_PATH=/api/v1/jobs/events/
# Settings that the config file may set; anything else there is ignored (and said so).
SETTINGS=$JOB_SETTINGS

CONFIG_FILE=${BELVEDERE_JOBS_CONFIG:-/etc/belvedere/jobs.env}
SHOWN_CHARS='A-Za-z0-9._:/@=+,[]-'

# ---------------------------------------------------------------------------------------------
# Validation: every value that goes into the JSON body must match a strict pattern, so the body
# can be built by plain concatenation with no way to break out of a string.
# ---------------------------------------------------------------------------------------------
# (The patterns of the values: in belvedere-common.sh.)

# ---------------------------------------------------------------------------------------------
# Configuration: built-in defaults < /etc/belvedere/jobs.env < the process environment.
# The file is parsed, not sourced: it is read by root on every node after every job, and a
# stray command in it must not run. The environment wins so that an admin can try another URL
# by hand, and so that the background child inherits exactly the settings its parent resolved.
# (The Prolog reads the same file.)
# ---------------------------------------------------------------------------------------------
load_config() {
    load_config_file
    : "${BELVEDERE_URL:=}"
    : "${BELVEDERE_TOKEN_FILE:=/etc/belvedere/jobs.token}"
    : "${BELVEDERE_CLUSTER:=${SLURM_CLUSTER_NAME:-}}"
    : "${BELVEDERE_JOB_TOKEN_DIR:=/run/belvedere}"
    : "${BELVEDERE_TIMEOUT:=5}"
    : "${BELVEDERE_EPILOG_JITTER:=5}"
    : "${BELVEDERE_LOG_STDERR:=0}"
    # (BELVEDERE_JOB_TOKENS and BELVEDERE_DISCOVERY_SCRIPT are the Prolog's; accepted here so
    # that both scripts can share one file.)
    job_config_checks
    flightrec_config_checks
    case $BELVEDERE_EPILOG_JITTER in '' | *[!0-9]*) BELVEDERE_EPILOG_JITTER=5 ;; esac
    # The background child gets the resolved settings through its environment (see above).
    # shellcheck disable=SC2086,SC2163  # exports each variable that SETTINGS names, as intended
    export $SETTINGS
}

# ---------------------------------------------------------------------------------------------
# The job's token file
# ---------------------------------------------------------------------------------------------
remove_job_token() {  # the job's token is of no use on this node any more; fails with a note
    dir=$BELVEDERE_JOB_TOKEN_DIR
    matches "$JOB_ID" "$JOB_ID_RE" || return 1
    if ! matches "$dir" "$DIR_RE"; then
        note "BELVEDERE_JOB_TOKEN_DIR $(shown "$dir") is not an absolute path of [A-Za-z0-9._/-]"
        return 1
    fi
    [ -e "$dir" ] || return 0
    # Only in a directory that nobody else can write, as the Prolog checks before writing.
    if ! own_directory "$dir"; then
        note "job token directory $(shown "$dir") is a link or not ours; token file left"
        return 1
    fi
    if writable_by_others "$(file_mode "$dir")"; then
        note "job token directory $(shown "$dir") is writable by group or others; token file left"
        return 1
    fi
    # The job's token, for its Flight Recorder dumps (the user may write anything in that file:
    # only a job token's characters are taken).
    if [ -n "$BELVEDERE_FLIGHTREC_DIR" ] && [ -f "$dir/job-$JOB_ID.token" ] && [ ! -L "$dir/job-$JOB_ID.token" ]; then
        JOB_TOKEN=$(first_line "$dir/job-$JOB_ID.token" | tr -d '[:blank:]')
        matches "$JOB_TOKEN" "$JOB_TOKEN_RE" || JOB_TOKEN=""
    fi
    # rm never follows a link; the second name is a temporary file of an interrupted Prolog.
    rm -f "$dir/job-$JOB_ID.token" "$dir/.job-$JOB_ID.token."?????? 2>/dev/null
    return 0
}

# ---------------------------------------------------------------------------------------------
# The end event
# ---------------------------------------------------------------------------------------------
job_outcome() {  # sets END_STATE and END_EXIT (may be empty) from what slurmd tells the Epilog
    # Observed with Slurm 22.05.8: SLURM_JOB_EXIT_CODE2 is "<exit status>:<signal>" of the batch
    # script (or salloc's command) and SLURM_JOB_EXIT_CODE the raw wait status (768 for exit 3).
    # They are only known when the job ended by itself: for a job ended by scancel (and so, by
    # the same path, a time limit or preemption) the Epilog sees 0:0 although Slurm records
    # CANCELLED with 0:15. So 0:0 does not mean COMPLETED, and a signal may be anything: only
    # "exited non-zero by itself" is sure (FAILED; Slurm may still say OUT_OF_MEMORY). All else is
    # ENDED, "final state unknown": the portal's sync (squeue/sacct) replaces it with Slurm's.
    # SLURM_JOB_DERIVED_EC (the highest exit status of any step) does not decide the state.
    END_STATE=ENDED
    END_EXIT=""
    exit_status=""
    signal=""
    code2=${SLURM_JOB_EXIT_CODE2:-}
    if matches "$code2" '(0|[1-9][0-9]{0,2}):(0|[1-9][0-9]{0,2})'; then
        exit_status=${code2%%:*}
        signal=${code2#*:}
    elif matches "${SLURM_JOB_EXIT_CODE:-}" '0|[1-9][0-9]{0,9}'; then
        exit_status=$(((SLURM_JOB_EXIT_CODE >> 8) & 255))
        signal=$((SLURM_JOB_EXIT_CODE & 127))
    fi
    if [ -n "$exit_status" ] && [ "$signal" -eq 0 ] && [ "$exit_status" -ge 1 ] && [ "$exit_status" -le 255 ]; then
        END_STATE=FAILED
        END_EXIT=$exit_status
    fi
}

build_body() {  # sets BODY and SUMMARY; fails (with a log line) if there is nothing to report
    job_is_known || return 1
    job_outcome
    SUMMARY="end of job $JOB_ID on $BELVEDERE_CLUSTER ($END_STATE${END_EXIT:+, exit $END_EXIT})"
    BODY="{\"cluster\":\"$BELVEDERE_CLUSTER\",\"job_id\":$JOB_ID,\"event\":\"end\""
    # The rest is optional for an end event: a bad value is dropped, the event still goes.
    user=${SLURM_JOB_USER:-}
    if [ -n "$user" ]; then
        if matches "$user" "$USER_RE"; then BODY="$BODY,\"user\":\"$user\""; else note "SLURM_JOB_USER $(shown "$user")"; fi
    fi
    add_partition_and_nodes
    BODY="$BODY,\"time\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"state\":\"$END_STATE\""
    [ -n "$END_EXIT" ] && BODY="$BODY,\"exit_code\":$END_EXIT"
    BODY="$BODY}"
    return 0
}

# ---------------------------------------------------------------------------------------------
# Sending
# ---------------------------------------------------------------------------------------------
post() {  # POSTs BODY within BELVEDERE_TIMEOUT seconds in all (one retry); logs the outcome;
    # returns curl's status (22 for HTTP >= 400)
    send 1
    status=$?
    case $CODE in
        2??)
            retried=""
            [ "$attempt" -gt 1 ] && retried=" (second try)"
            log info "$(with_notes "reported $SUMMARY to $(shown "$BELVEDERE_URL"): HTTP $CODE$retried")"
            return 0
            ;;
    esac
    send_failed "$status" ""
}

# ---------------------------------------------------------------------------------------------
# The job's Flight Recorder dumps (issue 36; functions in belvedere-common.sh)
# ---------------------------------------------------------------------------------------------
flightrec_post() {  # tars the dumps of FR_FOLDER as the job's user, removes the folder, POSTs the
    # archive with JOB_TOKEN to ?format=tar within BELVEDERE_FLIGHTREC_TIMEOUT; logs one line
    NOTES=""
    what="Flight Recorder dumps of job $JOB_ID in $FR_FOLDER"
    if [ -z "$JOB_TOKEN" ]; then
        flightrec_discard
        log warning "$what not posted: no job token (the Prolog got none, or its file was gone); folder removed"
        return 0
    fi
    if ! flightrec_pick; then
        flightrec_discard
        [ -n "$NOTES" ] && log warning "$(with_notes "no $what posted; folder removed")"
        return 0
    fi
    # Root's files in a fresh directory of its own (mode 700): no name a user could guess and plant a link at.
    work=$(mktemp -d 2>/dev/null) || { flightrec_discard; log warning "$what not posted: no temporary directory"; return 0; }
    archive=$work/dumps.tar.gz
    answer=$work/answer
    TMP_FILES="$TMP_FILES $archive $answer $work/errors"
    printf '%s' "$FR_NAMES" | flightrec_as_job_user sh -c "$FLIGHTREC_TAR" sh "$FR_FOLDER" >"$archive" 2>/dev/null
    tarred=$?
    flightrec_discard
    if [ "$tarred" -ne 0 ] || [ ! -s "$archive" ]; then
        rm -rf -- "$work"
        log warning "$(with_notes "$what not posted: tar failed as uid $FR_UID (status $tarred); folder removed")"
        return 0
    fi
    url="${BELVEDERE_URL%/}/api/v1/jobs/$BELVEDERE_CLUSTER/$JOB_ID/flight-recorder/?format=tar"
    # The job token on curl's stdin, never on its command line (ps).
    code=$(printf 'header = "Authorization: JobToken %s"\n' "$JOB_TOKEN" |
        curl -q --config - --silent --show-error --max-time "$BELVEDERE_FLIGHTREC_TIMEOUT" --proto =http,https \
            --user-agent "$TAG/1" --header 'Content-Type: application/octet-stream' --header 'Accept: application/json' \
            --data-binary "@$archive" --output "$answer" --write-out '%{http_code}' "$url" 2>"$work/errors")
    status=$?
    reason=$(head -c 200 "$work/errors" 2>/dev/null | tr -c '[:print:]' ' ')
    detail=$(head -c 300 "$answer" 2>/dev/null | tr -c '[:print:]' ' ')
    rm -rf -- "$work"
    what="$FR_COUNT Flight Recorder dump(s) of job $JOB_ID ($FR_BYTES bytes)"
    case $code in
        2??) log info "$(with_notes "posted $what to $(shown "$BELVEDERE_URL"): HTTP $code: $detail")" ;;
        000 | '') log warning "$(with_notes "failed to post $what to $(shown "$BELVEDERE_URL"): no HTTP answer within ${BELVEDERE_FLIGHTREC_TIMEOUT}s (curl status $status: $reason)")" ;;
        *) log warning "$(with_notes "failed to post $what to $(shown "$BELVEDERE_URL"): HTTP $code: $detail")" ;;
    esac
    return 0
}

# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------
usage() {
    sed -n '2,20s/^# \{0,1\}//p' "$0"
}

# The first stage of the background sender (see spawn_background in belvedere-common.sh).
detach_stage BELVEDERE_EPILOG

for argument in "$@"; do
    case $argument in
        --print) MODE=print ;;
        --foreground) MODE=foreground ;;
        -h | --help) usage; exit 0 ;;
        *) printf '%s: unknown option %s (see --help)\n' "$TAG" "$(shown "$argument")" >&2; finish 2 ;;
    esac
done
if [ "$MODE" = epilog ] && [ "${BELVEDERE_EPILOG_FOREGROUND:-0}" = 1 ]; then
    MODE=foreground
fi

load_config
JOB_ID=${SLURM_JOB_ID:-${SLURM_JOBID:-}}

if [ "$MODE" = print ]; then
    # Always exits 0: the body on stdout, or nothing (with the reason on stderr).
    if build_body; then
        printf '%s\n' "$BODY"
        [ -n "$NOTES" ] && log warning "$(with_notes "$SUMMARY")"
    fi
    # Which dumps the sender would post (listed as the job's user; nothing read or removed).
    NOTES=""
    if flightrec_folder && flightrec_pick; then
        log info "$(with_notes "would post $FR_COUNT Flight Recorder dump(s) ($FR_BYTES bytes) from $FR_FOLDER with the job's token, then remove it")"
    elif [ -n "$NOTES" ]; then
        log warning "$(with_notes "no Flight Recorder dumps would be posted")"
    fi
    exit 0
fi

# The sender gets the job token from its parent, which read it before removing the file (the
# environment of root's processes is root's to read); it is not passed on to curl's environment.
JOB_TOKEN=""
if [ "${BELVEDERE_EPILOG_STAGE:-}" = send ]; then
    JOB_TOKEN=${BELVEDERE_EPILOG_JOB_TOKEN:-}
    matches "$JOB_TOKEN" "$JOB_TOKEN_RE" || JOB_TOKEN=""
fi
unset BELVEDERE_EPILOG_JOB_TOKEN

# First the token file, whatever else happens (and even where no portal is configured): the job
# is over on this node. The detached sender has nothing left to remove.
if [ "${BELVEDERE_EPILOG_STAGE:-}" != send ] && ! remove_job_token; then
    log warning "$(with_notes "job $(shown "$JOB_ID"): token file not removed")"
    NOTES=""
fi

# The job's dump folder, checked (a link, or a folder not the job user's, is left alone and said).
FR_FOLDER=""
if ! flightrec_folder && [ -n "$NOTES" ] && [ "${BELVEDERE_EPILOG_STAGE:-}" != send ]; then
    log warning "$(with_notes "job $(shown "$JOB_ID"): Flight Recorder folder not read")"
fi
NOTES=""

# Without a portal, a valid job or the service token, nothing is sent, and the dumps go too.
can_send || { flightrec_discard; finish 2; }
build_body || { flightrec_discard; finish 1; }
read_token "not reporting $SUMMARY" || { flightrec_discard; finish 2; }

if [ "$MODE" = epilog ]; then
    [ -n "$FR_FOLDER" ] && BELVEDERE_EPILOG_JOB_TOKEN=$JOB_TOKEN && export BELVEDERE_EPILOG_JOB_TOKEN
    spawn_background BELVEDERE_EPILOG
    exit 0
fi
[ "${BELVEDERE_EPILOG_STAGE:-}" = send ] && jitter "$BELVEDERE_EPILOG_JITTER"
post
STATUS=$?
[ -n "$FR_FOLDER" ] && flightrec_post
finish "$STATUS"
