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
ENDPOINT_PATH=/api/v1/topology/discovery/
# Settings that the config file may set; anything else there is ignored (and said so).
SETTINGS="BELVEDERE_URL BELVEDERE_TOKEN_FILE BELVEDERE_SYSFS BELVEDERE_XNAME_FILE
BELVEDERE_DISCOVERY_STAMP_DIR BELVEDERE_TIMEOUT BELVEDERE_HOSTNAME BELVEDERE_GPU_MODEL
BELVEDERE_DISCOVERY_JITTER BELVEDERE_DISCOVERY_REFRESH_DAYS BELVEDERE_LOG_STDERR"

CONFIG_FILE=${BELVEDERE_DISCOVERY_CONFIG:-/etc/belvedere/discovery.env}
SHOWN_CHARS='A-Za-z0-9._:/@=+,-'
FORCE=0

# ---------------------------------------------------------------------------------------------
# Validation: every value that goes into the JSON body must match a strict pattern, so the body
# can be built by plain concatenation with no way to break out of a string.
# ---------------------------------------------------------------------------------------------
# (matches() and TOKEN_RE, URL_RE: belvedere-common.sh)
HOSTNAME_RE='[A-Za-z0-9][A-Za-z0-9._-]{0,63}'
# Node xnames of HPE Cray EX: cabinet, chassis, slot, board, node (x1000c0s1b0n0).
XNAME_RE='x[0-9]{1,6}c[0-9]{1,2}s[0-9]{1,2}b[0-9]{1,2}n[0-9]{1,2}'
NIC_RE='hsn[0-9]{1,2}'
# A Slingshot algorithmic MAC: 02:00:00 then a 20-bit NID (group, switch, port), so the 4th
# octet is 00-0f. A NIC that has not got its fabric address yet (link down at boot) shows its
# burned-in MAC; the portal would refuse the whole record for it, so such a NIC is left out.
AMA_RE='02:00:00:0[0-9a-f]:[0-9a-f]{2}:[0-9a-f]{2}'
GPU_MODEL_RE='[A-Za-z0-9][A-Za-z0-9 ._-]{0,39}'

# ---------------------------------------------------------------------------------------------
# Configuration: built-in defaults < /etc/belvedere/discovery.env < the process environment.
# The file is parsed, not sourced: it is read by root on every node before every job, and a
# stray command in it must not run. The environment wins so that an admin can try another URL
# by hand, and so that the background child inherits exactly the settings its parent resolved.
# ---------------------------------------------------------------------------------------------
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
    own_directory "$dir" && ! writable_by_others "$(file_mode "$dir")"
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
post() {  # waits for the POST; logs the outcome; returns curl's status (22 for HTTP >= 400)
    send 0
    status=$?
    case $CODE in
        2??)
            stamp_write "$HASH"
            changed=unchanged
            case $ANSWER in *'"changed":true'* | *'"changed": true'*) changed=changed ;; esac
            log info "$(with_notes "reported $SUMMARY to $(shown "$BELVEDERE_URL"): HTTP $CODE, $changed")"
            return 0
            ;;
    esac
    send_failed "$status" ""
}

# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------
usage() {
    sed -n '2,13s/^# \{0,1\}//p' "$0"
}

# The first stage of the background sender (see spawn_background in belvedere-common.sh).
detach_stage BELVEDERE_DISCOVERY

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

can_send || finish 2

build_body || finish 1
stamp_init
HASH=$(record_hash)
if [ "$FORCE" != 1 ] && stamp_is_current "$HASH"; then
    log info "$(with_notes "skipped $SUMMARY: unchanged since the last report")"
    finish 0
fi
read_token "not reporting" || finish 2

if [ "$MODE" = prolog ]; then
    # The sender is this script in --foreground mode (see spawn_background).
    BELVEDERE_DISCOVERY_FORCE=$FORCE
    export BELVEDERE_DISCOVERY_FORCE
    spawn_background BELVEDERE_DISCOVERY
    exit 0
fi
[ "${BELVEDERE_DISCOVERY_STAGE:-}" = send ] && jitter "$BELVEDERE_DISCOVERY_JITTER"
post
finish $?
