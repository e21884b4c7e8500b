#!/bin/sh
# belvedere-prolog.sh: Slurm node Prolog that tells Belvedere a job started and stores its job token.
#
# On each allocated node, before the job: POSTs a `start` event to /api/v1/jobs/events/ and asks
# for a job token, which it writes to <BELVEDERE_JOB_TOKEN_DIR>/job-<job id>.token (owned by the
# job's user, mode 600) for the TaskProlog to export; then starts belvedere-discovery.sh, if
# installed. See deploy/slurm/README.md.
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
NL='
'
CR=$(printf '\r')
ENDPOINT_PATH=/api/v1/jobs/events/
# Settings that the config file may set; anything else there is ignored (and said so).
# (BELVEDERE_EPILOG_JITTER is the Epilog's; accepted so that both scripts can share one file.)
SETTINGS="BELVEDERE_URL BELVEDERE_TOKEN_FILE BELVEDERE_CLUSTER BELVEDERE_JOB_TOKEN_DIR
BELVEDERE_JOB_TOKENS BELVEDERE_TIMEOUT BELVEDERE_DISCOVERY_SCRIPT BELVEDERE_LOG_STDERR
BELVEDERE_EPILOG_JITTER"

MODE=prolog
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
    if [ "$MODE" != prolog ] && [ -t 2 ]; then
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

# The exit status of a mode: the Prolog mode always exits 0, whatever went wrong.
finish() {  # $1: status for --foreground / --print
    if [ "$MODE" = prolog ]; then exit 0; fi
    exit "$1"
}

# ---------------------------------------------------------------------------------------------
# Validation: every value that goes into the JSON body either matches a strict pattern or is
# JSON-escaped (the job name), so the body can be built by plain concatenation.
# ---------------------------------------------------------------------------------------------
matches() {  # $1: value; $2: extended regex that the whole value must match
    # grep works line by line: a value "good<newline>evil" would match on its first line, so
    # multi-line values are refused before grep sees them.
    case $1 in *"$NL"* | *"$CR"*) return 1 ;; esac
    printf '%s\n' "$1" | grep -Eqx -- "$2"
}

json_text() {  # any text -> the inside of a JSON string: printable ASCII (tabs and newlines
    # become blanks, other bytes '?'), at most 200 characters, '\' and '"' escaped
    printf '%s' "$1" | tr '\t\n\r' '   ' | tr -c ' -~' '?' | head -c 200 | sed 's/[\\"]/\\&/g'
}

JOB_ID_RE='[1-9][0-9]{0,11}'
UID_RE='[0-9]{1,10}'
# The portal's patterns (apps/jobs/api/serializers.py): a value it would refuse would make it
# refuse the whole event.
CLUSTER_RE='[A-Za-z0-9_-]{1,64}'
USER_RE='[A-Za-z0-9_.@-]{1,64}'
ACCOUNT_RE='[A-Za-z0-9_.-]{1,64}'
PARTITION_RE='[A-Za-z0-9_.-]{1,64}'
# A Slurm hostlist (nid[000001-000128],login01); its length is checked separately.
HOSTLIST_RE='[]A-Za-z0-9._,[-]+'
TOKEN_RE='[A-Za-z0-9._~+/=-]{8,256}'
JOB_TOKEN_RE='bvj_[A-Za-z0-9_-]{20,200}'
# The characters the TaskProlog accepts in BELVEDERE_JOB_TOKEN_DIR.
DIR_RE='/[A-Za-z0-9._/-]*'
# ']' must open a bracket expression to be literal; ERE has no escapes inside brackets.
URL_RE='https?://[]A-Za-z0-9._~:@%!$&()*+,;=/[-]+'

# ---------------------------------------------------------------------------------------------
# Configuration: built-in defaults < /etc/belvedere/jobs.env < the process environment.
# The file is parsed, not sourced: it is read by root on every node before every job, and a
# stray command in it must not run. The environment wins so that an admin can try another URL
# by hand. (The Epilog reads the same file.)
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
    case $BELVEDERE_TIMEOUT in
        '' | *[!0-9]* | 0) note "BELVEDERE_TIMEOUT $(shown "$BELVEDERE_TIMEOUT") is not a number of seconds; using 5"; BELVEDERE_TIMEOUT=5 ;;
    esac
    # Each node waits this long at most, for every job: keep it short.
    [ "$BELVEDERE_TIMEOUT" -le 60 ] || BELVEDERE_TIMEOUT=60
    while :; do
        case $BELVEDERE_JOB_TOKEN_DIR in ?*/) BELVEDERE_JOB_TOKEN_DIR=${BELVEDERE_JOB_TOKEN_DIR%/} ;; *) break ;; esac
    done
}

# ---------------------------------------------------------------------------------------------
# The start event
# ---------------------------------------------------------------------------------------------
build_body() {  # sets BODY, JOB_ID, SUMMARY; fails (with a log line) if there is nothing to report
    JOB_ID=${SLURM_JOB_ID:-${SLURM_JOBID:-}}
    if ! matches "$JOB_ID" "$JOB_ID_RE"; then
        log warning "$(with_notes "not reporting: SLURM_JOB_ID $(shown "$JOB_ID") is not a job id")"
        return 1
    fi
    if ! matches "$BELVEDERE_CLUSTER" "$CLUSTER_RE"; then
        log warning "$(with_notes "not reporting job $JOB_ID: cluster name $(shown "$BELVEDERE_CLUSTER") (BELVEDERE_CLUSTER, else SLURM_CLUSTER_NAME) is not a valid name")"
        return 1
    fi
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
    if [ -n "${SLURM_JOB_PARTITION:-}" ]; then
        if matches "$SLURM_JOB_PARTITION" "$PARTITION_RE"; then
            BODY="$BODY,\"partition\":\"$SLURM_JOB_PARTITION\""
        else
            note "SLURM_JOB_PARTITION $(shown "$SLURM_JOB_PARTITION")"
        fi
    fi
    # A node Prolog gets SLURM_NODELIST (Slurm 22.05); SLURM_JOB_NODELIST elsewhere.
    nodes=${SLURM_JOB_NODELIST:-${SLURM_NODELIST:-}}
    if [ -n "$nodes" ]; then
        if [ "${#nodes}" -le 100000 ] && matches "$nodes" "$HOSTLIST_RE"; then
            BODY="$BODY,\"nodes\":\"$nodes\""
        else
            note "node list $(shown "$nodes")"
        fi
    fi
    BODY="$BODY,\"time\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\""
    return 0
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
    if [ ! -d "$dir" ] || [ -L "$dir" ] || [ ! -O "$dir" ]; then
        note "job token directory $(shown "$dir") is missing, a link, or not owned by $(id -un 2>/dev/null); no job token"
        return 1
    fi
    mode=$(stat -c '%a' "$dir" 2>/dev/null) || mode=777
    case $mode in
        *[2367]? | *[2367])
            note "job token directory $(shown "$dir") is writable by group or others (mode $mode); no job token"
            return 1
            ;;
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

post() {  # POSTs BODY within BELVEDERE_TIMEOUT seconds in all; sets ANSWER and CODE; logs
    # failures; returns curl's status (22 for HTTP >= 400)
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
        CODE=${response##*"$NL"}
        case $response in *"$NL"*) ANSWER=${response%"$NL"*} ;; *) ANSWER="" ;; esac
        case $CODE in [0-9][0-9][0-9]) ;; *) CODE=000 ;; esac
        # One retry, within the same time budget, when the portal answered "try again": the
        # nodes of one job all send their start event at once, and they may collide there.
        case $CODE in
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
    case $CODE in
        2??)
            return 0
            ;;
        000)
            reason=$(head -c 200 "$errors" 2>/dev/null | tr -c '[:print:]' ' ')
            log warning "$(with_notes "failed to report $SUMMARY to $(shown "$BELVEDERE_URL"): no HTTP answer within ${BELVEDERE_TIMEOUT}s (curl status $status: $reason)")"
            ;;
        3??)
            log warning "$(with_notes "failed to report $SUMMARY: HTTP $CODE redirect from $(shown "$url") (is BELVEDERE_URL the portal's https:// address?)")"
            [ "$status" -eq 0 ] && status=22
            ;;
        *)
            detail=$(printf '%s' "$ANSWER" | head -c 300 | tr -c '[:print:]' ' ')
            log warning "$(with_notes "failed to report $SUMMARY to $(shown "$BELVEDERE_URL"): HTTP $CODE: $detail")"
            [ "$status" -eq 0 ] && status=22
            ;;
    esac
    return "$status"
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
    mode=$(stat -L -c '%a' "$script" 2>/dev/null) || mode=777
    case $mode in
        *[2367]? | *[2367])
            log warning "not starting discovery: $(shown "$script") is writable by group or others (mode $mode)"
            return 0
            ;;
    esac
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
    sed -n '2,18s/^# \{0,1\}//p' "$0"
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
    fi
    exit 0
fi

# The start event, in the foreground: the job waits for it (at most BELVEDERE_TIMEOUT seconds).
STATUS=0
report_start() {
    if [ -z "$BELVEDERE_URL" ]; then
        # Not configured on this node: the Prolog stays silent (it runs before every job).
        [ "$MODE" = foreground ] && printf '%s: BELVEDERE_URL is not set (environment or %s)\n' \
            "$TAG" "${BELVEDERE_JOBS_CONFIG:-/etc/belvedere/jobs.env}" >&2
        STATUS=2; return
    fi
    if ! matches "$BELVEDERE_URL" "$URL_RE"; then
        log warning "not reporting: BELVEDERE_URL $(shown "$BELVEDERE_URL") is not an http(s):// URL"
        STATUS=2; return
    fi
    if ! command -v curl >/dev/null 2>&1; then
        log warning "not reporting: curl is not installed"
        STATUS=2; return
    fi
    build_body || { STATUS=1; return; }
    read_token || { STATUS=2; return; }
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
    fi
    log info "$(with_notes "$outcome")"
}
report_start

# Then the topology discovery, which never waits.
run_discovery
finish "$STATUS"
