#!/bin/sh
# belvedere-discovery.sh: Slurm node Prolog that reports this node's Slingshot NICs to Belvedere.
#
# Reads each hsnN interface's algorithmic MAC (it encodes dragonfly group, switch and port), the
# node's xname and GPU count, and POSTs them to /api/v1/topology/discovery/ so the portal knows
# the real node -> NIC -> switch -> group tree. See deploy/slurm/README.md.
#
# Usage: belvedere-discovery.sh [--print | --foreground] [--force]
#   (no option)   the Prolog mode: send in the background, return at once, always exit 0
#   --print       print the JSON body that would be sent and exit (no network, no token needed)
#   --foreground  wait for the POST and exit with curl's status (also BELVEDERE_DISCOVERY_FOREGROUND=1)
#   --force       send even if the record equals the one sent last time
#
# A non-zero Prolog drains the node and requeues the job, and a slow one delays every job, so
# the Prolog mode never fails and never waits: no `set -e`, every error ends in `exit 0`, and the
# only network I/O (one POST) runs detached from slurmd.
#
# POSIX sh (dash, bash, busybox ash): Debian-style nodes run /bin/sh as dash.

# A predictable environment: slurmd starts prologs with a minimal one, and LC_ALL=C keeps the
# character ranges in patterns below byte ranges (in other locales [a-z] can match more).
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}
LC_ALL=C
export PATH LC_ALL
umask 022

TAG=belvedere-discovery
NL='
'
CR=$(printf '\r')
ENDPOINT_PATH=/api/v1/topology/discovery/
# Settings that the config file may set; anything else there is ignored (and said so).
SETTINGS="BELVEDERE_URL BELVEDERE_TOKEN_FILE BELVEDERE_SYSFS BELVEDERE_XNAME_FILE
BELVEDERE_DISCOVERY_STAMP_DIR BELVEDERE_TIMEOUT BELVEDERE_HOSTNAME BELVEDERE_GPU_MODEL
BELVEDERE_DISCOVERY_JITTER BELVEDERE_DISCOVERY_REFRESH_DAYS BELVEDERE_LOG_STDERR"

MODE=prolog
FORCE=0
NOTES=""        # values dropped while collecting; appended to the run's one log line
TMP_FILES=""

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
    if [ "$MODE" != prolog ] && [ -t 2 ]; then
        printf '%s: %s\n' "$TAG" "$2" >&2
    fi
    return 0
}

note() {  # remember why a value was dropped; reported with the run's outcome
    NOTES="${NOTES:+$NOTES; }$1"
}

shown() {  # a value from outside, made harmless for a log line: no newlines (they would forge
    # log lines), no control characters, at most 64 characters
    printf '%s' "$1" | head -c 64 | tr -c 'A-Za-z0-9._:/@=+,-' '?'
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
# Validation: every value that goes into the JSON body must match a strict pattern, so the body
# can be built by plain concatenation with no way to break out of a string.
# ---------------------------------------------------------------------------------------------
matches() {  # $1: value; $2: extended regex that the whole value must match
    # grep works line by line: a value "good<newline>evil" would match on its first line, so
    # multi-line values are refused before grep sees them.
    case $1 in *"$NL"* | *"$CR"*) return 1 ;; esac
    printf '%s\n' "$1" | grep -Eqx -- "$2"
}

HOSTNAME_RE='[A-Za-z0-9][A-Za-z0-9._-]{0,63}'
# Node xnames of HPE Cray EX: cabinet, chassis, slot, board, node (x1000c0s1b0n0).
XNAME_RE='x[0-9]{1,6}c[0-9]{1,2}s[0-9]{1,2}b[0-9]{1,2}n[0-9]{1,2}'
NIC_RE='hsn[0-9]{1,2}'
# A Slingshot algorithmic MAC: 02:00:00 then a 20-bit NID (group, switch, port), so the 4th
# octet is 00-0f. A NIC that has not got its fabric address yet (link down at boot) shows its
# burned-in MAC; the portal would refuse the whole record for it, so such a NIC is left out.
AMA_RE='02:00:00:0[0-9a-f]:[0-9a-f]{2}:[0-9a-f]{2}'
GPU_MODEL_RE='[A-Za-z0-9][A-Za-z0-9 ._-]{0,39}'
TOKEN_RE='[A-Za-z0-9._~+/=-]{8,256}'
# ']' must open a bracket expression to be literal; ERE has no escapes inside brackets.
URL_RE='https?://[]A-Za-z0-9._~:@%!$&()*+,;=/[-]+'

# ---------------------------------------------------------------------------------------------
# Configuration: built-in defaults < /etc/belvedere/discovery.env < the process environment.
# The file is parsed, not sourced: it is read by root on every node before every job, and a
# stray command in it must not run. The environment wins so that an admin can try another URL
# by hand, and so that the background child inherits exactly the settings its parent resolved.
# ---------------------------------------------------------------------------------------------
load_config_file() {
    file=${BELVEDERE_DISCOVERY_CONFIG:-/etc/belvedere/discovery.env}
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
    : "${BELVEDERE_TOKEN_FILE:=/etc/belvedere/discovery.token}"
    : "${BELVEDERE_SYSFS:=/sys}"
    : "${BELVEDERE_XNAME_FILE:=/etc/cray/xname}"
    : "${BELVEDERE_DISCOVERY_STAMP_DIR:=/var/tmp/belvedere}"
    : "${BELVEDERE_TIMEOUT:=5}"
    : "${BELVEDERE_GPU_MODEL:=}"
    : "${BELVEDERE_DISCOVERY_JITTER:=10}"
    : "${BELVEDERE_DISCOVERY_REFRESH_DAYS:=7}"
    : "${BELVEDERE_LOG_STDERR:=0}"
    if [ -z "${BELVEDERE_HOSTNAME:-}" ]; then
        # The portal knows nodes by their Slurm names (job node lists come from Slurm); slurmd
        # gives a Prolog that name, which may differ from the host name (NodeHostname=).
        BELVEDERE_HOSTNAME=${SLURMD_NODENAME:-$(hostname -s 2>/dev/null || uname -n 2>/dev/null)}
        BELVEDERE_HOSTNAME=${BELVEDERE_HOSTNAME%%.*}
    fi
    case $BELVEDERE_TIMEOUT in '' | *[!0-9]*) note "BELVEDERE_TIMEOUT $(shown "$BELVEDERE_TIMEOUT") is not a number of seconds; using 5"; BELVEDERE_TIMEOUT=5 ;; esac
    case $BELVEDERE_DISCOVERY_JITTER in '' | *[!0-9]*) BELVEDERE_DISCOVERY_JITTER=10 ;; esac
    case $BELVEDERE_DISCOVERY_REFRESH_DAYS in '' | *[!0-9]*) BELVEDERE_DISCOVERY_REFRESH_DAYS=7 ;; esac
    # The background child gets the resolved settings through its environment (see above).
    # shellcheck disable=SC2086,SC2163  # exports each variable that SETTINGS names, as intended
    export $SETTINGS
}

# ---------------------------------------------------------------------------------------------
# Collecting the record
# ---------------------------------------------------------------------------------------------
first_line() {  # the first line of a readable regular file, without a trailing CR
    [ -f "$1" ] && [ -r "$1" ] || return 1
    IFS= read -r _first <"$1" || [ -n "$_first" ] || return 1
    printf '%s' "${_first%"$CR"}"
}

collect_nics() {  # sets NICS_JSON and NIC_COUNT
    NICS_JSON=""
    NIC_COUNT=0
    for dir in "$BELVEDERE_SYSFS"/class/net/hsn*; do
        [ -e "$dir/address" ] || continue
        name=${dir##*/}
        if ! matches "$name" "$NIC_RE"; then
            note "interface $(shown "$name") (not hsnN)"
            continue
        fi
        mac=$(first_line "$dir/address" | tr 'A-F' 'a-f')
        if ! matches "$mac" "$AMA_RE"; then
            note "$name MAC $(shown "$mac") (not a Slingshot algorithmic MAC 02:00:00:0x:xx:xx)"
            continue
        fi
        NICS_JSON="${NICS_JSON:+$NICS_JSON,}{\"name\":\"$name\",\"mac\":\"$mac\"}"
        NIC_COUNT=$((NIC_COUNT + 1))
    done
}

count_gpus() {  # prints the number of GPUs bound to the nvidia driver; fails if no driver dir
    driver="$BELVEDERE_SYSFS/bus/pci/drivers/nvidia"
    [ -d "$driver" ] || return 1
    count=0
    # Bound devices appear as links named by PCI address DDDD:BB:DD.F. The domain is not always
    # 0000 (GH200 GPUs sit in 0009, 0019, 0029, 0039), so any domain counts.
    for device in "$driver"/[0-9a-f][0-9a-f][0-9a-f][0-9a-f]:*; do
        [ -e "$device" ] || continue
        # The nvidia driver also binds NVSwitches on HGX boards; only display controllers
        # (PCI class 0x03xxxx) are GPUs. A device without a class file is counted.
        class=$(first_line "$device/class" 2>/dev/null) || class=""
        case $class in '' | 0x03*) count=$((count + 1)) ;; esac
    done
    printf '%s' "$count"
}

build_body() {  # sets BODY and SUMMARY; fails (with a log line) if there is nothing to report
    hostname=$BELVEDERE_HOSTNAME
    if ! matches "$hostname" "$HOSTNAME_RE"; then
        log warning "$(with_notes "not reporting: $(shown "$hostname") is not a valid host name")"
        return 1
    fi
    collect_nics
    if [ "$NIC_COUNT" -eq 0 ]; then
        log info "$(with_notes "not reporting $hostname: no hsn* interface with a Slingshot algorithmic MAC under $(shown "$BELVEDERE_SYSFS")/class/net")"
        return 1
    fi
    BODY="{\"hostname\":\"$hostname\""
    SUMMARY="$hostname: $NIC_COUNT NICs"
    if xname=$(first_line "$BELVEDERE_XNAME_FILE"); then
        if matches "$xname" "$XNAME_RE"; then
            BODY="$BODY,\"xname\":\"$xname\""
            SUMMARY="$SUMMARY, $xname"
        else
            note "xname $(shown "$xname") from $(shown "$BELVEDERE_XNAME_FILE") (not a node xname)"
        fi
    fi
    if gpus=$(count_gpus); then
        BODY="$BODY,\"gpus\":$gpus"
        SUMMARY="$SUMMARY, $gpus GPUs"
    fi
    if [ -n "$BELVEDERE_GPU_MODEL" ]; then
        if matches "$BELVEDERE_GPU_MODEL" "$GPU_MODEL_RE"; then
            BODY="$BODY,\"gpu_model\":\"$BELVEDERE_GPU_MODEL\""
        else
            note "BELVEDERE_GPU_MODEL $(shown "$BELVEDERE_GPU_MODEL")"
        fi
    fi
    BODY="$BODY,\"nics\":[$NICS_JSON]}"
    return 0
}

# ---------------------------------------------------------------------------------------------
# The stamp: the hash of the last body the portal accepted, so that thousands of nodes starting
# jobs do not re-send a topology that rarely changes. It is refreshed every REFRESH_DAYS so a
# portal whose database was rebuilt learns the nodes again.
# ---------------------------------------------------------------------------------------------
record_hash() {
    if command -v sha256sum >/dev/null 2>&1; then
        printf '%s\n%s\n' "$BELVEDERE_URL" "$BODY" | sha256sum | cut -d' ' -f1
    else
        printf '%s\n%s\n' "$BELVEDERE_URL" "$BODY" | cksum | tr ' ' '-'
    fi
}

stamp_dir_usable() {
    # The default lives under /var/tmp, which every user can write: root must not follow a
    # user's symlink or write into a user's directory there (it could be made to truncate any
    # file), so the directory must be a real directory owned by us and writable by no one else.
    dir=$BELVEDERE_DISCOVERY_STAMP_DIR
    if [ ! -e "$dir" ] && [ ! -L "$dir" ]; then
        mkdir -p "$dir" 2>/dev/null || return 1
    fi
    [ -d "$dir" ] && [ ! -L "$dir" ] && [ -O "$dir" ] || return 1
    mode=$(stat -c '%a' "$dir" 2>/dev/null) || return 1
    case $mode in *[2367]? | *[2367]) return 1 ;; esac  # group- or world-writable
    return 0
}

STAMP_FILE=""
stamp_init() {
    if stamp_dir_usable; then
        STAMP_FILE="$BELVEDERE_DISCOVERY_STAMP_DIR/discovery.sha256"
    else
        STAMP_FILE=""
        note "stamp directory $(shown "$BELVEDERE_DISCOVERY_STAMP_DIR") is unusable (not ours, or writable by others); sending every time"
    fi
}

stamp_is_current() {  # $1: hash
    [ -n "$STAMP_FILE" ] && [ -f "$STAMP_FILE" ] && [ ! -L "$STAMP_FILE" ] || return 1
    [ "$(first_line "$STAMP_FILE")" = "$1" ] || return 1
    if [ "$BELVEDERE_DISCOVERY_REFRESH_DAYS" -gt 0 ]; then
        # find prints the file only if it was modified more than REFRESH_DAYS days ago.
        old=$(find "$STAMP_FILE" -mmin +$((BELVEDERE_DISCOVERY_REFRESH_DAYS * 1440)) 2>/dev/null)
        [ -z "$old" ] || return 1
    fi
    return 0
}

stamp_write() {  # $1: hash; written to a fresh file, then renamed over the old one
    [ -n "$STAMP_FILE" ] || return 0
    tmp=$(mktemp "$STAMP_FILE.XXXXXX" 2>/dev/null) || return 0
    if printf '%s\n' "$1" >"$tmp" && mv -f "$tmp" "$STAMP_FILE"; then
        return 0
    fi
    rm -f "$tmp"
    return 0
}

# ---------------------------------------------------------------------------------------------
# Sending
# ---------------------------------------------------------------------------------------------
read_token() {  # prints the token; fails with a log line
    if ! TOKEN=$(first_line "$BELVEDERE_TOKEN_FILE"); then
        log warning "$(with_notes "not reporting: token file $(shown "$BELVEDERE_TOKEN_FILE") is missing or unreadable")"
        return 1
    fi
    TOKEN=$(printf '%s' "$TOKEN" | tr -d '[:blank:]')
    if ! matches "$TOKEN" "$TOKEN_RE"; then
        log warning "$(with_notes "not reporting: token file $(shown "$BELVEDERE_TOKEN_FILE") does not hold a token")"
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

post() {  # waits for the POST; logs the outcome; returns curl's status (22 for HTTP >= 400)
    url="${BELVEDERE_URL%/}$ENDPOINT_PATH"
    errors=$(mktemp 2>/dev/null) || errors=/dev/null
    [ "$errors" != /dev/null ] && TMP_FILES="$TMP_FILES $errors"
    # The token travels in curl's config read from stdin, never on the command line, where any
    # user on the node could read it in `ps`. -q (first) ignores a ~/.curlrc.
    response=$(printf 'header = "Authorization: Token %s"\n' "$TOKEN" |
        curl -q --config - "$(curl_fail_option)" --silent --show-error \
            --max-time "$BELVEDERE_TIMEOUT" --proto =http,https \
            --user-agent "$TAG/1" \
            --header 'Content-Type: application/json' --header 'Accept: application/json' \
            --data-binary "$BODY" --write-out '\n%{http_code}' \
            "$url" 2>"$errors")
    status=$?
    code=${response##*"$NL"}
    case $response in *"$NL"*) answer=${response%"$NL"*} ;; *) answer="" ;; esac
    case $code in [0-9][0-9][0-9]) ;; *) code=000 ;; esac
    case $code in
        2??)
            stamp_write "$HASH"
            changed=unchanged
            case $answer in *'"changed":true'* | *'"changed": true'*) changed=changed ;; esac
            log info "$(with_notes "reported $SUMMARY to $(shown "$BELVEDERE_URL"): HTTP $code, $changed")"
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
    # slurmd kills the Prolog's whole process group as soon as the Prolog exits, so the sender
    # must be in a session of its own *before* this script exits. `setsid cmd &` would race: the
    # forked child may not have called setsid() yet when the group is killed. So the Prolog waits
    # for a short first stage that setsid runs in a new session (without forking: a foreground
    # command of a non-interactive shell is not a group leader); that stage starts the sender in
    # the background, inside the new session, and exits at once.
    # stdio points away from slurmd's pipes, or slurmd could wait for the sender to close them.
    # The sender is this script in --foreground mode, with the resolved, exported settings.
    BELVEDERE_DISCOVERY_FOREGROUND=1 BELVEDERE_DISCOVERY_STAGE=detach BELVEDERE_DISCOVERY_FORCE=$FORCE
    export BELVEDERE_DISCOVERY_FOREGROUND BELVEDERE_DISCOVERY_STAGE BELVEDERE_DISCOVERY_FORCE
    if command -v setsid >/dev/null 2>&1; then
        setsid sh "$0" </dev/null >/dev/null 2>&1
    else
        # No util-linux: the sender may be killed with the Prolog's group; it retries next job.
        BELVEDERE_DISCOVERY_STAGE=send nohup sh "$0" </dev/null >/dev/null 2>&1 &
    fi
    return 0
}

jitter() {
    # When a record changed on many nodes at once (first install, a fabric re-cable), a job on
    # the whole machine would send thousands of POSTs in the same second; spread them out.
    [ "$BELVEDERE_DISCOVERY_JITTER" -gt 0 ] || return 0
    random=$(od -An -N2 -tu2 /dev/urandom 2>/dev/null | tr -d ' ') || random=0
    case $random in '' | *[!0-9]*) random=0 ;; esac
    sleep $((random % (BELVEDERE_DISCOVERY_JITTER + 1))) 2>/dev/null
    return 0
}

# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------
usage() {
    sed -n '2,13s/^# \{0,1\}//p' "$0"
}

# First stage of the background sender (see spawn_background): already in its own session; start
# the sender there and return at once, before reading anything.
if [ "${BELVEDERE_DISCOVERY_STAGE:-}" = detach ]; then
    BELVEDERE_DISCOVERY_STAGE=send
    export BELVEDERE_DISCOVERY_STAGE
    sh "$0" </dev/null >/dev/null 2>&1 &
    exit 0
fi

for argument in "$@"; do
    case $argument in
        --print) MODE=print ;;
        --foreground) MODE=foreground ;;
        --force) FORCE=1 ;;
        -h | --help) usage; exit 0 ;;
        *) printf '%s: unknown option %s (see --help)\n' "$TAG" "$(shown "$argument")" >&2; finish 2 ;;
    esac
done
if [ "$MODE" = prolog ] && [ "${BELVEDERE_DISCOVERY_FOREGROUND:-0}" = 1 ]; then
    MODE=foreground
fi
[ "${BELVEDERE_DISCOVERY_FORCE:-0}" = 1 ] && FORCE=1

load_config

if [ "$MODE" = print ]; then
    # Always exits 0: the body on stdout, or nothing (with the reason on stderr).
    if build_body; then
        printf '%s\n' "$BODY"
        [ -n "$NOTES" ] && log warning "$(with_notes "record of $SUMMARY")"
    fi
    exit 0
fi

if [ -z "$BELVEDERE_URL" ]; then
    # Not configured on this node: the Prolog stays silent (it runs before every job).
    [ "$MODE" = foreground ] && printf '%s: BELVEDERE_URL is not set (environment or %s)\n' \
        "$TAG" "${BELVEDERE_DISCOVERY_CONFIG:-/etc/belvedere/discovery.env}" >&2
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
stamp_init
HASH=$(record_hash)
if [ "$FORCE" != 1 ] && stamp_is_current "$HASH"; then
    log info "$(with_notes "skipped $SUMMARY: unchanged since the last report")"
    finish 0
fi
read_token || finish 2

if [ "$MODE" = prolog ]; then
    spawn_background
    exit 0
fi
[ "${BELVEDERE_DISCOVERY_STAGE:-}" = send ] && jitter
post
finish $?
