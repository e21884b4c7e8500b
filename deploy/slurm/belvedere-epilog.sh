#!/bin/sh
# belvedere-epilog.sh: Slurm node Epilog that tells Belvedere a job ended and removes its token file.
#
# On each node of the job, after it: deletes <BELVEDERE_JOB_TOKEN_DIR>/job-<job id>.token (left
# by belvedere-prolog.sh) and POSTs an `end` event to /api/v1/jobs/events/ from a detached
# process, so the node is released at once. See deploy/slurm/README.md.
#
# Usage: belvedere-epilog.sh [--print | --foreground]
#   (no option)   the Epilog mode: send in the background, return at once, always exit 0
#   --print       print the JSON body that would be sent and exit (no network, no token, no files)
#   --foreground  remove the token file, wait for the POST and exit with curl's status (also
#                 BELVEDERE_EPILOG_FOREGROUND=1)
#
# A non-zero Epilog drains the node, and a slow one holds it, so the Epilog mode never fails and
# never waits: no `set -e`, every error ends in `exit 0`, and the only network I/O (one POST)
# runs detached from slurmd.
#
# POSIX sh (dash, bash, busybox ash): Debian-style nodes run /bin/sh as dash.

# A predictable environment: slurmd starts epilogs with a minimal one (no PATH at all in Slurm
# 22.05), and LC_ALL=C keeps the character ranges in patterns below byte ranges.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}
LC_ALL=C
export PATH LC_ALL
umask 022

TAG=belvedere-epilog
NL='
'
CR=$(printf '\r')
ENDPOINT_PATH=/api/v1/jobs/events/
# Settings that the config file may set; anything else there is ignored (and said so).
SETTINGS="BELVEDERE_URL BELVEDERE_TOKEN_FILE BELVEDERE_CLUSTER BELVEDERE_JOB_TOKEN_DIR
BELVEDERE_JOB_TOKENS BELVEDERE_TIMEOUT BELVEDERE_DISCOVERY_SCRIPT BELVEDERE_LOG_STDERR
BELVEDERE_EPILOG_JITTER"

MODE=epilog
NOTES=""        # values dropped while collecting; appended to the run's one log line
TMP_FILES=""

# ---------------------------------------------------------------------------------------------
# Logging: one line per run (syslog when `logger` exists; stderr in tests or by hand)
# ---------------------------------------------------------------------------------------------
log() {  # $1: priority (info, warning, err); $2: message
    if [ "$MODE" = print ] || [ "${BELVEDERE_LOG_STDERR:-0}" = 1 ] || ! command -v logger >/dev/null 2>&1; then
        printf '%s: %s\n' "$TAG" "$2" >&2
        return 0
    fi
    logger -t "$TAG" -p "daemon.$1" -- "$2" 2>/dev/null || printf '%s: %s\n' "$TAG" "$2" >&2
    # An admin running the script by hand wants to see the outcome too.
    if [ "$MODE" != epilog ] && [ -t 2 ]; then
        printf '%s: %s\n' "$TAG" "$2" >&2
    fi
    return 0
}

note() {  # remember why a value was dropped; reported with the run's outcome
    NOTES="${NOTES:+$NOTES; }$1"
}

shown() {  # a value from outside, made harmless for a log line: one line, no control
    # characters, at most 64 characters
    printf '%s' "$1" | head -c 64 | tr -c 'A-Za-z0-9._:/@=+,[]-' '?'
}

with_notes() {
    if [ -n "$NOTES" ]; then printf '%s (dropped: %s)' "$1" "$NOTES"; else printf '%s' "$1"; fi
}

# shellcheck disable=SC2317  # called through the EXIT trap
cleanup() {
    # shellcheck disable=SC2086  # TMP_FILES holds mktemp names, which contain no blanks
    [ -n "$TMP_FILES" ] && rm -f $TMP_FILES
    return 0
}
trap cleanup EXIT
trap 'finish 1' HUP INT TERM

# The exit status of a mode: the Epilog mode always exits 0, whatever went wrong.
finish() {  # $1: status for --foreground / --print
    if [ "$MODE" = epilog ]; then exit 0; fi
    exit "$1"
}

# ---------------------------------------------------------------------------------------------
# Validation: every value that goes into the JSON body must match a strict pattern, so the body
# can be built by plain concatenation with no way to break out of a string.
# ---------------------------------------------------------------------------------------------
matches() {  # $1: value; $2: extended regex that the whole value must match
    # grep works line by line: a value "good<newline>evil" would match on its first line, so
    # multi-line values are refused before grep sees them.
    case $1 in *"$NL"* | *"$CR"*) return 1 ;; esac
    printf '%s\n' "$1" | grep -Eqx -- "$2"
}

JOB_ID_RE='[1-9][0-9]{0,11}'
# The portal's patterns (apps/jobs/api/serializers.py): a value it would refuse would make it
# refuse the whole event.
CLUSTER_RE='[A-Za-z0-9_-]{1,64}'
USER_RE='[A-Za-z0-9_.@-]{1,64}'
PARTITION_RE='[A-Za-z0-9_.-]{1,64}'
# A Slurm hostlist (nid[000001-000128],login01); its length is checked separately.
HOSTLIST_RE='[]A-Za-z0-9._,[-]+'
TOKEN_RE='[A-Za-z0-9._~+/=-]{8,256}'
# The characters the TaskProlog accepts in BELVEDERE_JOB_TOKEN_DIR.
DIR_RE='/[A-Za-z0-9._/-]*'
# ']' must open a bracket expression to be literal; ERE has no escapes inside brackets.
URL_RE='https?://[]A-Za-z0-9._~:@%!$&()*+,;=/[-]+'

# ---------------------------------------------------------------------------------------------
# Configuration: built-in defaults < /etc/belvedere/jobs.env < the process environment.
# The file is parsed, not sourced: it is read by root on every node after every job, and a
# stray command in it must not run. The environment wins so that an admin can try another URL
# by hand, and so that the background child inherits exactly the settings its parent resolved.
# (The Prolog reads the same file.)
# ---------------------------------------------------------------------------------------------
load_config_file() {
    file=${BELVEDERE_JOBS_CONFIG:-/etc/belvedere/jobs.env}
    [ -r "$file" ] && [ -f "$file" ] || return 0
    # Which settings the environment already gives: those the file must not change.
    from_environment=" "
    for name in $SETTINGS; do
        eval "given=\${$name+set}"  # $name comes from SETTINGS, a fixed list
        [ -n "$given" ] && from_environment="$from_environment$name "
    done
    while IFS= read -r line || [ -n "$line" ]; do
        line=${line%"$CR"}
        # Leading blanks, comments, blank lines, an optional `export `.
        line=$(printf '%s' "$line" | sed -e 's/^[[:blank:]]*//' -e 's/^export[[:blank:]][[:blank:]]*//')
        case $line in '' | '#'*) continue ;; esac
        name=${line%%=*}
        value=${line#*=}
        if [ "$name" = "$line" ]; then
            note "config line without '=': $(shown "$line")"
            continue
        fi
        # Only a known variable name goes further: it is used in `eval` below.
        case $name in '' | *[!A-Z0-9_]*) note "config setting $(shown "$name")"; continue ;; esac
        case " $(printf '%s' "$SETTINGS" | tr '\n' ' ') " in
            *" $name "*) ;;
            *) note "unknown config setting $(shown "$name")"; continue ;;
        esac
        case $from_environment in *" $name "*) continue ;; esac
        # One pair of surrounding quotes, as a shell or systemd's EnvironmentFile would accept.
        case $value in
            \"*\") value=${value#\"}; value=${value%\"} ;;
            \'*\') value=${value#\'}; value=${value%\'} ;;
        esac
        # The value is assigned by reference: eval never expands or runs it.
        eval "$name=\$value"
    done <"$file"
    return 0
}

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
    case $BELVEDERE_TIMEOUT in
        '' | *[!0-9]* | 0) note "BELVEDERE_TIMEOUT $(shown "$BELVEDERE_TIMEOUT") is not a number of seconds; using 5"; BELVEDERE_TIMEOUT=5 ;;
    esac
    [ "$BELVEDERE_TIMEOUT" -le 60 ] || BELVEDERE_TIMEOUT=60
    case $BELVEDERE_EPILOG_JITTER in '' | *[!0-9]*) BELVEDERE_EPILOG_JITTER=5 ;; esac
    while :; do
        case $BELVEDERE_JOB_TOKEN_DIR in ?*/) BELVEDERE_JOB_TOKEN_DIR=${BELVEDERE_JOB_TOKEN_DIR%/} ;; *) break ;; esac
    done
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
    mode=$(stat -c '%a' "$dir" 2>/dev/null) || mode=777
    if [ ! -d "$dir" ] || [ -L "$dir" ] || [ ! -O "$dir" ]; then
        note "job token directory $(shown "$dir") is a link or not ours; token file left"
        return 1
    fi
    case $mode in
        *[2367]? | *[2367]) note "job token directory $(shown "$dir") is writable by group or others; token file left"; return 1 ;;
    esac
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
    if ! matches "$JOB_ID" "$JOB_ID_RE"; then
        log warning "$(with_notes "not reporting: SLURM_JOB_ID $(shown "$JOB_ID") is not a job id")"
        return 1
    fi
    if ! matches "$BELVEDERE_CLUSTER" "$CLUSTER_RE"; then
        log warning "$(with_notes "not reporting job $JOB_ID: cluster name $(shown "$BELVEDERE_CLUSTER") (BELVEDERE_CLUSTER, else SLURM_CLUSTER_NAME) is not a valid name")"
        return 1
    fi
    job_outcome
    SUMMARY="end of job $JOB_ID on $BELVEDERE_CLUSTER ($END_STATE${END_EXIT:+, exit $END_EXIT})"
    BODY="{\"cluster\":\"$BELVEDERE_CLUSTER\",\"job_id\":$JOB_ID,\"event\":\"end\""
    # The rest is optional for an end event: a bad value is dropped, the event still goes.
    user=${SLURM_JOB_USER:-}
    if [ -n "$user" ]; then
        if matches "$user" "$USER_RE"; then BODY="$BODY,\"user\":\"$user\""; else note "SLURM_JOB_USER $(shown "$user")"; fi
    fi
    if [ -n "${SLURM_JOB_PARTITION:-}" ]; then
        if matches "$SLURM_JOB_PARTITION" "$PARTITION_RE"; then
            BODY="$BODY,\"partition\":\"$SLURM_JOB_PARTITION\""
        else
            note "SLURM_JOB_PARTITION $(shown "$SLURM_JOB_PARTITION")"
        fi
    fi
    # A node Epilog gets SLURM_NODELIST (Slurm 22.05); SLURM_JOB_NODELIST elsewhere.
    nodes=${SLURM_JOB_NODELIST:-${SLURM_NODELIST:-}}
    if [ -n "$nodes" ]; then
        if [ "${#nodes}" -le 100000 ] && matches "$nodes" "$HOSTLIST_RE"; then
            BODY="$BODY,\"nodes\":\"$nodes\""
        else
            note "node list $(shown "$nodes")"
        fi
    fi
    BODY="$BODY,\"time\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"state\":\"$END_STATE\""
    [ -n "$END_EXIT" ] && BODY="$BODY,\"exit_code\":$END_EXIT"
    BODY="$BODY}"
    return 0
}

# ---------------------------------------------------------------------------------------------
# Sending
# ---------------------------------------------------------------------------------------------
first_line() {  # the first line of a readable regular file, without a trailing CR
    [ -f "$1" ] && [ -r "$1" ] || return 1
    IFS= read -r _first <"$1" || [ -n "$_first" ] || return 1
    printf '%s' "${_first%"$CR"}"
}

read_token() {  # sets TOKEN; fails with a log line
    if ! TOKEN=$(first_line "$BELVEDERE_TOKEN_FILE"); then
        log warning "$(with_notes "not reporting $SUMMARY: token file $(shown "$BELVEDERE_TOKEN_FILE") is missing or unreadable")"
        return 1
    fi
    TOKEN=$(printf '%s' "$TOKEN" | tr -d '[:blank:]')
    if ! matches "$TOKEN" "$TOKEN_RE"; then
        log warning "$(with_notes "not reporting $SUMMARY: token file $(shown "$BELVEDERE_TOKEN_FILE") does not hold a token")"
        return 1
    fi
    return 0
}

curl_fail_option() {
    # --fail-with-body (curl >= 7.76) keeps the portal's error text for the log line.
    if curl --help all 2>/dev/null | grep -q -- '--fail-with-body'; then
        printf '%s' --fail-with-body
    else
        printf '%s' --fail
    fi
}

post() {  # POSTs BODY within BELVEDERE_TIMEOUT seconds in all; logs the outcome; returns
    # curl's status (22 for HTTP >= 400)
    url="${BELVEDERE_URL%/}$ENDPOINT_PATH"
    errors=$(mktemp 2>/dev/null) || errors=/dev/null
    [ "$errors" != /dev/null ] && TMP_FILES="$TMP_FILES $errors"
    fail_option=$(curl_fail_option)
    started=$(date +%s)
    budget=$BELVEDERE_TIMEOUT
    attempt=1
    while :; do
        # The token travels in curl's config read from stdin, never on the command line, where
        # any user on the node could read it in `ps`. -q (first) ignores a ~/.curlrc.
        response=$(printf 'header = "Authorization: Token %s"\n' "$TOKEN" |
            curl -q --config - "$fail_option" --silent --show-error \
                --max-time "$budget" --proto =http,https \
                --user-agent "$TAG/1" \
                --header 'Content-Type: application/json' --header 'Accept: application/json' \
                --data-binary "$BODY" --write-out '\n%{http_code}' \
                "$url" 2>"$errors")
        status=$?
        code=${response##*"$NL"}
        case $response in *"$NL"*) answer=${response%"$NL"*} ;; *) answer="" ;; esac
        case $code in [0-9][0-9][0-9]) ;; *) code=000 ;; esac
        # One retry, within the same time budget, when the portal answered "try again" (all
        # nodes of a job send their end event at about the same time).
        case $code in
            5?? | 429)
                budget=$((BELVEDERE_TIMEOUT - ($(date +%s) - started)))
                if [ "$attempt" -eq 1 ] && [ "$budget" -ge 1 ]; then
                    attempt=2
                    sleep 1
                    budget=$((budget - 1))
                    [ "$budget" -ge 1 ] && continue
                fi
                ;;
        esac
        break
    done
    case $code in
        2??)
            retried=""
            [ "$attempt" -gt 1 ] && retried=" (second try)"
            log info "$(with_notes "reported $SUMMARY to $(shown "$BELVEDERE_URL"): HTTP $code$retried")"
            return 0
            ;;
        000)
            reason=$(head -c 200 "$errors" 2>/dev/null | tr -c '[:print:]' ' ')
            log warning "$(with_notes "failed to report $SUMMARY to $(shown "$BELVEDERE_URL"): no HTTP answer (curl status $status: $reason)")"
            ;;
        3??)
            log warning "$(with_notes "failed to report $SUMMARY: HTTP $code redirect from $(shown "$url") (is BELVEDERE_URL the portal's https:// address?)")"
            [ "$status" -eq 0 ] && status=22
            ;;
        *)
            detail=$(printf '%s' "$answer" | head -c 300 | tr -c '[:print:]' ' ')
            log warning "$(with_notes "failed to report $SUMMARY to $(shown "$BELVEDERE_URL"): HTTP $code: $detail")"
            [ "$status" -eq 0 ] && status=22
            ;;
    esac
    return "$status"
}

spawn_background() {
    # slurmd kills the Epilog's whole process group as soon as the Epilog exits, so the sender
    # must be in a session of its own *before* this script exits. `setsid cmd &` would race: the
    # forked child may not have called setsid() yet when the group is killed. So the Epilog waits
    # for a short first stage that setsid runs in a new session (without forking: a foreground
    # command of a non-interactive shell is not a group leader); that stage starts the sender in
    # the background, inside the new session, and exits at once.
    # stdio points away from slurmd's pipes, or slurmd could wait for the sender to close them.
    # The sender is this script in --foreground mode, with the resolved, exported settings.
    BELVEDERE_EPILOG_FOREGROUND=1 BELVEDERE_EPILOG_STAGE=detach
    export BELVEDERE_EPILOG_FOREGROUND BELVEDERE_EPILOG_STAGE
    if command -v setsid >/dev/null 2>&1; then
        setsid sh "$0" </dev/null >/dev/null 2>&1
    else
        # No util-linux: the sender may be killed with the Epilog's group (the sync fills in).
        BELVEDERE_EPILOG_STAGE=send nohup sh "$0" </dev/null >/dev/null 2>&1 &
    fi
    return 0
}

jitter() {
    # Every node of a job ends at the same moment: a job on the whole machine would make
    # thousands of nodes POST in the same second; spread them out.
    [ "$BELVEDERE_EPILOG_JITTER" -gt 0 ] || return 0
    random=$(od -An -N2 -tu2 /dev/urandom 2>/dev/null | tr -d ' ') || random=0
    case $random in '' | *[!0-9]*) random=0 ;; esac
    sleep $((random % (BELVEDERE_EPILOG_JITTER + 1))) 2>/dev/null
    return 0
}

# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------
usage() {
    sed -n '2,17s/^# \{0,1\}//p' "$0"
}

# First stage of the background sender (see spawn_background): already in its own session; start
# the sender there and return at once, before reading anything.
if [ "${BELVEDERE_EPILOG_STAGE:-}" = detach ]; then
    BELVEDERE_EPILOG_STAGE=send
    export BELVEDERE_EPILOG_STAGE
    sh "$0" </dev/null >/dev/null 2>&1 &
    exit 0
fi

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
    exit 0
fi

# First the token file, whatever else happens (and even where no portal is configured): the job
# is over on this node. The detached sender has nothing left to remove.
if [ "${BELVEDERE_EPILOG_STAGE:-}" != send ] && ! remove_job_token; then
    log warning "$(with_notes "job $(shown "$JOB_ID"): token file not removed")"
    NOTES=""
fi

if [ -z "$BELVEDERE_URL" ]; then
    # Not configured on this node: the Epilog stays silent (it runs after every job).
    [ "$MODE" = foreground ] && printf '%s: BELVEDERE_URL is not set (environment or %s)\n' \
        "$TAG" "${BELVEDERE_JOBS_CONFIG:-/etc/belvedere/jobs.env}" >&2
    finish 2
fi
if ! matches "$BELVEDERE_URL" "$URL_RE"; then
    log warning "not reporting: BELVEDERE_URL $(shown "$BELVEDERE_URL") is not an http(s):// URL"
    finish 2
fi
if ! command -v curl >/dev/null 2>&1; then
    log warning "not reporting: curl is not installed"
    finish 2
fi

build_body || finish 1
read_token || finish 2

if [ "$MODE" = epilog ]; then
    spawn_background
    exit 0
fi
[ "${BELVEDERE_EPILOG_STAGE:-}" = send ] && jitter
post
finish $?
