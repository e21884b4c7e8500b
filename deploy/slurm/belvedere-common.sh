# belvedere-common.sh: functions shared by belvedere-discovery.sh, belvedere-prolog.sh and
# belvedere-epilog.sh (root's node Prolog and Epilog). See deploy/slurm/README.md.
#
# Sourced, never run: it only defines functions, so sourcing it has no effect of its own. It must
# lie next to the real scripts (a link to a script, as in /etc/slurm/prolog.d/, is followed),
# owned by root and writable by nobody else (mode 0644): root sources it before every job. A
# script that finds it missing or unsafe logs one line and exits 0 (it never fails a job).
# belvedere-taskprolog.sh runs as the job's user and does not use it.
#
# The sourcing script sets, before calling these functions: TAG (the syslog tag), HOOK_MODE
# (the name of its Slurm mode: prolog or epilog), MODE (HOOK_MODE, print or foreground), NL and
# CR, SHOWN_CHARS (the characters shown() keeps), SETTINGS (the names its config file may set),
# CONFIG_FILE, ENDPOINT_PATH, NOTES and TMP_FILES.
#
# POSIX sh (dash, bash, busybox ash).
# shellcheck shell=sh
# shellcheck disable=SC2154  # the variables above are the sourcing script's

# ---------------------------------------------------------------------------------------------
# Start-up: safe defaults for the variables the functions below use, and the traps
# ---------------------------------------------------------------------------------------------
common_init() {  # $1: the hook's mode name (prolog or epilog)
    HOOK_MODE=$1
    MODE=$1
    NL='
'
    CR=$(printf '\r')
    NOTES=""        # values dropped while collecting; appended to the run's one log line
    TMP_FILES=""
    TOKEN_RE='[A-Za-z0-9._~+/=-]{8,256}'
    # ']' must open a bracket expression to be literal; ERE has no escapes inside brackets.
    URL_RE='https?://[]A-Za-z0-9._~:@%!$&()*+,;=/[-]+'
    trap cleanup EXIT
    trap 'finish 1' HUP INT TERM
}

# ---------------------------------------------------------------------------------------------
# Logging: one line per run (syslog when `logger` exists; stderr in tests or by hand)
# ---------------------------------------------------------------------------------------------
log() {  # $1: priority (info, warning, err); $2: message
    # --print is for people and tests: its remarks go to the terminal, not to syslog.
    if [ "$MODE" = print ] || [ "${BELVEDERE_LOG_STDERR:-0}" = 1 ] || ! command -v logger >/dev/null 2>&1; then
        printf '%s: %s\n' "$TAG" "$2" >&2
        return 0
    fi
    logger -t "$TAG" -p "daemon.$1" -- "$2" 2>/dev/null || printf '%s: %s\n' "$TAG" "$2" >&2
    # An admin running the script by hand wants to see the outcome too.
    if [ "$MODE" != "$HOOK_MODE" ] && [ -t 2 ]; then
        printf '%s: %s\n' "$TAG" "$2" >&2
    fi
    return 0
}

note() {  # remember why a value was dropped; reported with the run's outcome
    NOTES="${NOTES:+$NOTES; }$1"
}

shown() {  # a value from outside, made harmless for a log line: one line, no control
    # characters, at most 64 characters (those of SHOWN_CHARS; others become '?')
    printf '%s' "$1" | head -c 64 | tr -c "$SHOWN_CHARS" '?'
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

# The exit status of a mode: the Slurm mode (Prolog, Epilog) always exits 0, whatever went wrong.
finish() {  # $1: status for --foreground / --print
    if [ "$MODE" = "$HOOK_MODE" ]; then exit 0; fi
    exit "$1"
}

# ---------------------------------------------------------------------------------------------
# Validation: every value that goes into a JSON body must match a strict pattern (or be
# escaped), so the body can be built by plain concatenation.
# ---------------------------------------------------------------------------------------------
matches() {  # $1: value; $2: extended regex that the whole value must match
    # grep works line by line: a value "good<newline>evil" would match on its first line, so
    # multi-line values are refused before grep sees them.
    case $1 in *"$NL"* | *"$CR"*) return 1 ;; esac
    printf '%s\n' "$1" | grep -Eqx -- "$2"
}

first_line() {  # the first line of a readable regular file, without a trailing CR
    [ -f "$1" ] && [ -r "$1" ] || return 1
    IFS= read -r _first <"$1" || [ -n "$_first" ] || return 1
    printf '%s' "${_first%"$CR"}"
}

# ---------------------------------------------------------------------------------------------
# Files root uses: a directory it writes into, or a program it runs, must be its own and
# writable by nobody else, or a user could plant a link or change what root does.
# ---------------------------------------------------------------------------------------------
file_mode() {  # $1: path (a link is followed); prints its permission bits, 777 if unknown
    stat -L -c '%a' "$1" 2>/dev/null || printf '777'
}

writable_by_others() {  # $1: permission bits from file_mode; true if group- or world-writable
    case $1 in *[2367]? | *[2367]) return 0 ;; esac
    return 1
}

own_directory() {  # $1: path; true if a real directory (not a link) owned by us
    [ -d "$1" ] && [ ! -L "$1" ] && [ -O "$1" ]
}

# ---------------------------------------------------------------------------------------------
# Configuration: built-in defaults < CONFIG_FILE < the process environment.
# The file is parsed, not sourced: it is read by root on every node for every job, and a stray
# command in it must not run. The environment wins so that an admin can try another URL by
# hand, and so that a background child inherits exactly the settings its parent resolved.
# ---------------------------------------------------------------------------------------------
load_config_file() {
    file=$CONFIG_FILE
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

# ---------------------------------------------------------------------------------------------
# Sending
# ---------------------------------------------------------------------------------------------
can_send() {  # fails (with a log line, or a message in --foreground) if the node cannot send
    if [ -z "$BELVEDERE_URL" ]; then
        # Not configured on this node: the Slurm mode stays silent (it runs for every job).
        [ "$MODE" = foreground ] && printf '%s: BELVEDERE_URL is not set (environment or %s)\n' \
            "$TAG" "$CONFIG_FILE" >&2
        return 1
    fi
    if ! matches "$BELVEDERE_URL" "$URL_RE"; then
        log warning "not reporting: BELVEDERE_URL $(shown "$BELVEDERE_URL") is not an http(s):// URL"
        return 1
    fi
    if ! command -v curl >/dev/null 2>&1; then
        log warning "not reporting: curl is not installed"
        return 1
    fi
    return 0
}

read_token() {  # $1: the start of the log line if it fails ("not reporting ..."); sets TOKEN
    if ! TOKEN=$(first_line "$BELVEDERE_TOKEN_FILE"); then
        log warning "$(with_notes "$1: token file $(shown "$BELVEDERE_TOKEN_FILE") is missing or unreadable")"
        return 1
    fi
    TOKEN=$(printf '%s' "$TOKEN" | tr -d '[:blank:]')
    if ! matches "$TOKEN" "$TOKEN_RE"; then
        log warning "$(with_notes "$1: token file $(shown "$BELVEDERE_TOKEN_FILE") does not hold a token")"
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

send() {  # $1: 1 to try once more, within BELVEDERE_TIMEOUT seconds in all, when the portal
    # answers "try again" (5xx, 429); 0 for one try. POSTs BODY with TOKEN to BELVEDERE_URL +
    # ENDPOINT_PATH; sets url, CODE (000: no HTTP answer), ANSWER, attempt, errors (curl's
    # messages); returns curl's status
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
        case $CODE in
            5?? | 429)
                [ "$1" = 1 ] || break
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
    return "$status"
}

send_failed() {  # $1: curl's status from send; $2: words after "no HTTP answer" (may be empty)
    # logs why the POST failed; returns curl's status (22 for HTTP >= 400)
    status=$1
    case $CODE in
        000)
            reason=$(head -c 200 "$errors" 2>/dev/null | tr -c '[:print:]' ' ')
            log warning "$(with_notes "failed to report $SUMMARY to $(shown "$BELVEDERE_URL"): no HTTP answer$2 (curl status $status: $reason)")"
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

# ---------------------------------------------------------------------------------------------
# The detached sender of the Slurm mode
# ---------------------------------------------------------------------------------------------
spawn_background() {  # $1: the prefix of the script's variables (BELVEDERE_EPILOG)
    # slurmd kills the hook's whole process group as soon as the hook exits, so the sender must
    # be in a session of its own *before* this script exits. `setsid cmd &` would race: the
    # forked child may not have called setsid() yet when the group is killed. So the hook waits
    # for a short first stage that setsid runs in a new session (without forking: a foreground
    # command of a non-interactive shell is not a group leader); that stage starts the sender in
    # the background, inside the new session, and exits at once (detach_stage).
    # stdio points away from slurmd's pipes, or slurmd could wait for the sender to close them.
    # The sender is this script in --foreground mode, with the resolved, exported settings.
    eval "${1}_FOREGROUND=1 ${1}_STAGE=detach"  # $1 is the script's fixed prefix
    export "${1}_FOREGROUND" "${1}_STAGE"
    if command -v setsid >/dev/null 2>&1; then
        setsid sh "$0" </dev/null >/dev/null 2>&1
    else
        # No util-linux: the sender may be killed with the hook's group (a later run or the
        # portal's sync makes up for it).
        eval "${1}_STAGE=send"
        nohup sh "$0" </dev/null >/dev/null 2>&1 &
    fi
    return 0
}

detach_stage() {  # $1: the prefix of the script's variables; returns unless in the first stage
    # The first stage of the background sender (see spawn_background): already in its own
    # session; start the sender there and exit at once, before reading anything.
    eval "stage=\${${1}_STAGE:-}"
    [ "$stage" = detach ] || return 0
    eval "${1}_STAGE=send"
    export "${1}_STAGE"
    sh "$0" </dev/null >/dev/null 2>&1 &
    exit 0
}

jitter() {  # $1: at most this many seconds
    # When many nodes send at once (all nodes of a job end together; a first install), a job on
    # the whole machine would send thousands of POSTs in the same second; spread them out.
    [ "$1" -gt 0 ] || return 0
    random=$(od -An -N2 -tu2 /dev/urandom 2>/dev/null | tr -d ' ') || random=0
    case $random in '' | *[!0-9]*) random=0 ;; esac
    sleep $((random % ($1 + 1))) 2>/dev/null
    return 0
}

# ---------------------------------------------------------------------------------------------
# Job events (Prolog and Epilog)
# ---------------------------------------------------------------------------------------------
# The portal's patterns (apps/jobs/api/serializers.py): a value it would refuse would make it
# refuse the whole event.
# shellcheck disable=SC2034  # used by the sourcing scripts
job_patterns() {
    # The settings of /etc/belvedere/jobs.env, which the Prolog and the Epilog share (each
    # accepts the other's).
    JOB_SETTINGS="BELVEDERE_URL BELVEDERE_TOKEN_FILE BELVEDERE_CLUSTER BELVEDERE_JOB_TOKEN_DIR
BELVEDERE_JOB_TOKENS BELVEDERE_TIMEOUT BELVEDERE_DISCOVERY_SCRIPT BELVEDERE_LOG_STDERR
BELVEDERE_EPILOG_JITTER BELVEDERE_FLIGHTREC_DIR BELVEDERE_FLIGHTREC_MAX_MB BELVEDERE_FLIGHTREC_TIMEOUT"
    JOB_ID_RE='[1-9][0-9]{0,11}'
    CLUSTER_RE='[A-Za-z0-9_-]{1,64}'
    USER_RE='[A-Za-z0-9_.@-]{1,64}'
    PARTITION_RE='[A-Za-z0-9_.-]{1,64}'
    # A Slurm hostlist (nid[000001-000128],login01); its length is checked separately.
    HOSTLIST_RE='[]A-Za-z0-9._,[-]+'
    # The characters the TaskProlog accepts in BELVEDERE_JOB_TOKEN_DIR.
    DIR_RE='/[A-Za-z0-9._/-]*'
    UID_RE='[0-9]{1,10}'
    JOB_TOKEN_RE='bvj_[A-Za-z0-9_-]{20,200}'
}

job_config_checks() {  # BELVEDERE_TIMEOUT: 1 to 60 seconds; BELVEDERE_JOB_TOKEN_DIR without a
    # trailing '/'
    case $BELVEDERE_TIMEOUT in
        '' | *[!0-9]* | 0) note "BELVEDERE_TIMEOUT $(shown "$BELVEDERE_TIMEOUT") is not a number of seconds; using 5"; BELVEDERE_TIMEOUT=5 ;;
    esac
    # Each node waits this long at most, for every job: keep it short.
    [ "$BELVEDERE_TIMEOUT" -le 60 ] || BELVEDERE_TIMEOUT=60
    while :; do
        case $BELVEDERE_JOB_TOKEN_DIR in ?*/) BELVEDERE_JOB_TOKEN_DIR=${BELVEDERE_JOB_TOKEN_DIR%/} ;; *) break ;; esac
    done
}

job_is_known() {  # fails (with a log line) unless JOB_ID and BELVEDERE_CLUSTER are valid
    if ! matches "$JOB_ID" "$JOB_ID_RE"; then
        log warning "$(with_notes "not reporting: SLURM_JOB_ID $(shown "$JOB_ID") is not a job id")"
        return 1
    fi
    if ! matches "$BELVEDERE_CLUSTER" "$CLUSTER_RE"; then
        log warning "$(with_notes "not reporting job $JOB_ID: cluster name $(shown "$BELVEDERE_CLUSTER") (BELVEDERE_CLUSTER, else SLURM_CLUSTER_NAME) is not a valid name")"
        return 1
    fi
    return 0
}

add_partition_and_nodes() {  # appends the job's partition and node list to BODY, if valid
    if [ -n "${SLURM_JOB_PARTITION:-}" ]; then
        if matches "$SLURM_JOB_PARTITION" "$PARTITION_RE"; then
            BODY="$BODY,\"partition\":\"$SLURM_JOB_PARTITION\""
        else
            note "SLURM_JOB_PARTITION $(shown "$SLURM_JOB_PARTITION")"
        fi
    fi
    # A node Prolog or Epilog gets SLURM_NODELIST (Slurm 22.05); SLURM_JOB_NODELIST elsewhere.
    nodes=${SLURM_JOB_NODELIST:-${SLURM_NODELIST:-}}
    if [ -n "$nodes" ]; then
        if [ "${#nodes}" -le 100000 ] && matches "$nodes" "$HOSTLIST_RE"; then
            BODY="$BODY,\"nodes\":\"$nodes\""
        else
            note "node list $(shown "$nodes")"
        fi
    fi
}

# ---------------------------------------------------------------------------------------------
# PyTorch Flight Recorder dumps (issue 36): <BELVEDERE_FLIGHTREC_DIR>/<job id>/nccl_trace_rank_<N>
# The Prolog makes the job's folder (the job's user's, mode 0700) in a directory of root's that
# nobody else can write, the TaskProlog points TORCH_NCCL_DEBUG_INFO_TEMP_FILE into it, and the
# Epilog's detached sender reads the dumps *as the job's user* (a user who swaps a dump for a
# link or a hard link to a file of root's gets nothing root could read), posts them as one
# .tar.gz with the job's token and removes the folder.
# ---------------------------------------------------------------------------------------------
# shellcheck disable=SC2034  # FLIGHTREC_PREFIX is the Prolog's and the TaskProlog's
flightrec_config_checks() {  # defaults and bounds of the BELVEDERE_FLIGHTREC_* settings, and the
    # names of the dumps
    FLIGHTREC_PREFIX=nccl_trace_rank_
    FLIGHTREC_NAME_RE='nccl_trace_rank_[A-Za-z0-9._-]{1,64}'
    : "${BELVEDERE_FLIGHTREC_DIR:=}"
    : "${BELVEDERE_FLIGHTREC_MAX_MB:=256}"
    : "${BELVEDERE_FLIGHTREC_TIMEOUT:=60}"
    while :; do
        case $BELVEDERE_FLIGHTREC_DIR in ?*/) BELVEDERE_FLIGHTREC_DIR=${BELVEDERE_FLIGHTREC_DIR%/} ;; *) break ;; esac
    done
    case $BELVEDERE_FLIGHTREC_MAX_MB in
        '' | *[!0-9]* | 0) note "BELVEDERE_FLIGHTREC_MAX_MB $(shown "$BELVEDERE_FLIGHTREC_MAX_MB") is not a number of MB; using 256"; BELVEDERE_FLIGHTREC_MAX_MB=256 ;;
    esac
    [ "${#BELVEDERE_FLIGHTREC_MAX_MB}" -le 6 ] || BELVEDERE_FLIGHTREC_MAX_MB=256
    case $BELVEDERE_FLIGHTREC_TIMEOUT in
        '' | *[!0-9]* | 0) note "BELVEDERE_FLIGHTREC_TIMEOUT $(shown "$BELVEDERE_FLIGHTREC_TIMEOUT") is not a number of seconds; using 60"; BELVEDERE_FLIGHTREC_TIMEOUT=60 ;;
    esac
    [ "${#BELVEDERE_FLIGHTREC_TIMEOUT}" -le 4 ] && [ "$BELVEDERE_FLIGHTREC_TIMEOUT" -le 600 ] || BELVEDERE_FLIGHTREC_TIMEOUT=600
    # What the job's user sees in its folder: "<bytes> <name>" per regular file of its own (no link)
    # whose name starts with the dump prefix. Run as that user, so it reads only what the user may.
    # shellcheck disable=SC2016  # expanded by the sh that runs it
    FLIGHTREC_LIST='cd -- "$1" || exit 3
    for name in nccl_trace_rank_*; do
        if [ -f "$name" ] && [ ! -h "$name" ] && [ -O "$name" ] && [ -r "$name" ]; then
            size=$(stat -c %s -- "$name" 2>/dev/null) && printf "%s %s\n" "$size" "$name"
        elif [ -e "$name" ] || [ -h "$name" ]; then
            printf "skip %s\n" "$name"
        fi
    done'
    # A .tar.gz of the named files (one a line on stdin) on stdout; GNU tar stores a link as a link
    # (never what it points to) and --no-recursion keeps a name swapped for a directory from growing.
    # shellcheck disable=SC2016
    FLIGHTREC_TAR='cd -- "$1" && exec tar -czf - --no-recursion -T -'
}

flightrec_base_usable() {  # $1: 1 to create the directory when missing; sets FR_BASE; fails
    # (with a note) unless BELVEDERE_FLIGHTREC_DIR is a real directory of ours nobody else can write
    FR_BASE=$BELVEDERE_FLIGHTREC_DIR
    if ! matches "$FR_BASE" "$DIR_RE"; then
        note "BELVEDERE_FLIGHTREC_DIR $(shown "$FR_BASE") is not an absolute path of [A-Za-z0-9._/-]"
        return 1
    fi
    if [ "$1" = 1 ] && [ ! -e "$FR_BASE" ] && [ ! -L "$FR_BASE" ]; then
        # shellcheck disable=SC2174  # parents get 0755 too, from the umask
        mkdir -p -m 0755 "$FR_BASE" 2>/dev/null
    fi
    # Users must not be able to make or rename the job folders in it: root creates, reads the
    # names of and removes what is there.
    if ! own_directory "$FR_BASE"; then
        note "Flight Recorder directory $(shown "$FR_BASE") is missing, a link, or not owned by $(id -un 2>/dev/null)"
        return 1
    fi
    fr_mode=$(file_mode "$FR_BASE")
    if writable_by_others "$fr_mode"; then
        note "Flight Recorder directory $(shown "$FR_BASE") is writable by group or others (mode $fr_mode)"
        return 1
    fi
    return 0
}

flightrec_job_ids() {  # sets FR_UID and FR_GID from SLURM_JOB_UID and SLURM_JOB_GID; fails with a note
    FR_UID=${SLURM_JOB_UID:-}
    if ! matches "$FR_UID" "$UID_RE"; then
        note "SLURM_JOB_UID $(shown "$FR_UID") is not a uid"
        return 1
    fi
    # Without the job's group, the dumps are read with nobody's group: the user's own files need
    # only the user's uid.
    FR_GID=${SLURM_JOB_GID:-}
    matches "$FR_GID" "$UID_RE" || FR_GID=65534
    return 0
}

flightrec_as_job_user() {  # runs "$@" as the job's user (FR_UID, FR_GID), in /
    if [ "$(id -u)" = "$FR_UID" ]; then
        (cd / && "$@")
        return
    fi
    [ "$(id -u)" = 0 ] || return 126
    command -v setpriv >/dev/null 2>&1 || return 127
    (cd / && setpriv --reuid="$FR_UID" --regid="$FR_GID" --clear-groups -- "$@")
}

flightrec_folder() {  # the job's folder, checked; sets FR_FOLDER; fails with a note: "" when there
    # is none (the job wrote no dumps, or the feature is off), else why it is not used
    FR_FOLDER=""
    [ -n "$BELVEDERE_FLIGHTREC_DIR" ] || return 1
    matches "$JOB_ID" "$JOB_ID_RE" || return 1
    flightrec_base_usable 0 || return 1
    folder="$FR_BASE/$JOB_ID"
    [ -e "$folder" ] || [ -L "$folder" ] || return 1
    flightrec_job_ids || return 1
    if [ -L "$folder" ] || [ ! -d "$folder" ]; then
        note "Flight Recorder folder $(shown "$folder") is a link or not a directory; not read"
        return 1
    fi
    owner=$(stat -c %u -- "$folder" 2>/dev/null)
    if [ "$owner" != "$FR_UID" ]; then
        note "Flight Recorder folder $(shown "$folder") belongs to uid $(shown "$owner"), not the job's user ($FR_UID); not read"
        return 1
    fi
    FR_FOLDER=$folder
    return 0
}

flightrec_pick() {  # lists FR_FOLDER as the job's user; sets FR_NAMES (one a line), FR_COUNT,
    # FR_BYTES, FR_SKIPPED (links, others' files, odd names, files past the caps); fails when
    # there is nothing to send
    FR_NAMES=""
    FR_COUNT=0
    FR_BYTES=0
    FR_SKIPPED=0
    budget=$((BELVEDERE_FLIGHTREC_MAX_MB * 1048576))
    per_dump=67108864  # the portal reads at most 64 MiB of a dump (FLIGHTREC_MAX_DUMP_BYTES)
    listing=$(flightrec_as_job_user sh -c "$FLIGHTREC_LIST" sh "$FR_FOLDER" 2>/dev/null) || {
        note "could not list $(shown "$FR_FOLDER") as uid $FR_UID"
        return 1
    }
    # In name order, so that the cap keeps the same ranks every time.
    while IFS=' ' read -r size name; do
        [ -n "$size" ] || continue
        if [ "$size" = skip ] || ! matches "$name" "$FLIGHTREC_NAME_RE" || ! matches "$size" '[0-9]{1,15}' ||
            [ "$size" -gt "$per_dump" ] || [ $((FR_BYTES + size)) -gt "$budget" ]; then
            FR_SKIPPED=$((FR_SKIPPED + 1))
            continue
        fi
        FR_NAMES="$FR_NAMES$name$NL"
        FR_COUNT=$((FR_COUNT + 1))
        FR_BYTES=$((FR_BYTES + size))
    done <<LISTING
$(printf '%s\n' "$listing" | sort -k 2)
LISTING
    [ "$FR_SKIPPED" -gt 0 ] && note "$FR_SKIPPED file(s) in the Flight Recorder folder left out (links, not the job user's, odd names, or past BELVEDERE_FLIGHTREC_MAX_MB)"
    [ "$FR_COUNT" -gt 0 ]
}

flightrec_discard() {  # removes the job's folder (root's directory, so the name cannot be swapped;
    # rm never follows a link inside it)
    [ -n "$FR_FOLDER" ] && rm -rf -- "$FR_FOLDER" 2>/dev/null
    return 0
}
