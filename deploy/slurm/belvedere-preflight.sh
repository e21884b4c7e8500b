#!/bin/sh
# belvedere-preflight.sh: Slurm node Prolog that checks a node before a job pays for it, and tells Belvedere.
#
# On each allocated node, before the job: reads every GPU's total and free memory and the node's versions
# (driver, VBIOS, InfoROM, serial) with nvidia-smi, and
#   - checks that each GPU has at least BELVEDERE_PREFLIGHT_MIN_FREE percent (default 90) of its memory
#     allocatable (a driver defect left file caches in GPU memory: such a node must not join an allocation);
#   - checks the node's driver and VBIOS against its partition's expected set, fetched from the portal
#     (GET /api/v1/system/versions/?partition=<partition>: the majority of the partition's nodes);
# and posts both checks as a vetting run (source "preflight", POST /api/v1/vetting/runs/) with the versions read.
#
# BELVEDERE_PREFLIGHT (environment or the config file):
#   report   (default) record only: the Prolog always exits 0
#   enforce  a failing node is drained (scontrol update NodeName=<node> State=DRAIN Reason="Belvedere pre-flight:
#            ...") and the script exits 1: Slurm's prolog exit semantics then requeue the job (and keep the node
#            drained). The reason does not start with "Belvedere:", so the portal never resumes such a node: it did
#            not drain it; staff resume it in Slurm after fixing it.
#   off      do nothing
#
# Usage: belvedere-preflight.sh [--print | --foreground]
#   (no option)   the Prolog mode
#   --print       measure, print the JSON body that would be sent and the verdict; no network, no drain
#   --foreground  the Prolog mode's work, exit with the outcome (0: passed and sent; 1: failed; 2: not sent)
#
# The probe is BELVEDERE_PREFLIGHT_NVIDIA_SMI (default nvidia-smi), called as
#   <probe> --query-gpu=index,memory.total,memory.free,driver_version,vbios_version,inforom.img,serial \
#           --format=csv,noheader,nounits
# (tests point it at a script that prints such lines). Settings: /etc/belvedere/jobs.env (shared with the Prolog
# and Epilog; BELVEDERE_JOBS_CONFIG names another file) < the environment. POSIX sh. See deploy/slurm/README.md.

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}
LC_ALL=C
export PATH LC_ALL
umask 022

TAG=belvedere-preflight
COMMON=$(readlink -f -- "$0" 2>/dev/null) || COMMON=$0
case $COMMON in */*) COMMON=${COMMON%/*}/belvedere-common.sh ;; *) COMMON=./belvedere-common.sh ;; esac
# shellcheck source=SCRIPTDIR/belvedere-common.sh
case $(id -u):$(stat -L -c '%u:%a' "$COMMON" 2>/dev/null) in
    0:0:*[0145][0145] | [1-9]*:*:*) sh -n "$COMMON" 2>/dev/null && . "$COMMON" ;;
esac
if ! command -v common_init >/dev/null 2>&1; then
    printf '%s: not running: %s is missing, broken, or not root'"'"'s alone\n' "$TAG" "$COMMON" >&2
    exit 0
fi
common_init preflight
job_patterns
ENDPOINT_PATH=/api/v1/vetting/runs/
SETTINGS="$JOB_SETTINGS
BELVEDERE_PREFLIGHT BELVEDERE_PREFLIGHT_MIN_FREE BELVEDERE_PREFLIGHT_NVIDIA_SMI BELVEDERE_PREFLIGHT_VERSIONS"
CONFIG_FILE=${BELVEDERE_JOBS_CONFIG:-/etc/belvedere/jobs.env}
SHOWN_CHARS='A-Za-z0-9._:/@=+,[]%-'
VERSION_RE='[!-~]([ -~]{0,198}[!-~])?'

load_config() {
    load_config_file
    : "${BELVEDERE_URL:=}"
    : "${BELVEDERE_TOKEN_FILE:=/etc/belvedere/jobs.token}"
    : "${BELVEDERE_CLUSTER:=${SLURM_CLUSTER_NAME:-}}"
    : "${BELVEDERE_TIMEOUT:=5}"
    : "${BELVEDERE_LOG_STDERR:=0}"
    : "${BELVEDERE_PREFLIGHT:=report}"
    : "${BELVEDERE_PREFLIGHT_MIN_FREE:=90}"
    : "${BELVEDERE_PREFLIGHT_NVIDIA_SMI:=nvidia-smi}"
    : "${BELVEDERE_PREFLIGHT_VERSIONS:=1}"
    BELVEDERE_JOB_TOKEN_DIR=/run/belvedere
    job_config_checks
    case $BELVEDERE_PREFLIGHT in
        report | enforce | off) ;;
        *) note "BELVEDERE_PREFLIGHT $(shown "$BELVEDERE_PREFLIGHT") is not report, enforce or off; using report"
           BELVEDERE_PREFLIGHT=report ;;
    esac
    case $BELVEDERE_PREFLIGHT_MIN_FREE in
        '' | *[!0-9]*) note "BELVEDERE_PREFLIGHT_MIN_FREE $(shown "$BELVEDERE_PREFLIGHT_MIN_FREE") is not a percentage; using 90"
                       BELVEDERE_PREFLIGHT_MIN_FREE=90 ;;
    esac
    [ "$BELVEDERE_PREFLIGHT_MIN_FREE" -le 100 ] || BELVEDERE_PREFLIGHT_MIN_FREE=100
}

json_text() {  # printable ASCII, '\' and '"' escaped, at most 300 characters
    printf '%s' "$1" | tr '\t\n\r' '   ' | tr -c ' -~' '?' | head -c 300 | sed 's/[\\"]/\\&/g'
}

# ---------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------
probe() {  # sets GPUS (the probe's lines), or fails with PROBLEM
    GPUS=$("$BELVEDERE_PREFLIGHT_NVIDIA_SMI" \
        --query-gpu=index,memory.total,memory.free,driver_version,vbios_version,inforom.img,serial \
        --format=csv,noheader,nounits 2>/dev/null) || { PROBLEM="$(shown "$BELVEDERE_PREFLIGHT_NVIDIA_SMI") failed"; return 1; }
    [ -n "$GPUS" ] || { PROBLEM="$(shown "$BELVEDERE_PREFLIGHT_NVIDIA_SMI") listed no GPU"; return 1; }
    return 0
}

version_item() {  # $1: gpu index or "" (the node's); $2: key; $3: value -> appends to VERSIONS (JSON)
    matches "$3" "$VERSION_RE" || return 0
    case $3 in 'N/A' | '[N/A]' | '[Not Supported]') return 0 ;; esac
    if [ -n "$1" ]; then
        item="{\"gpu\":$1,\"key\":\"$2\",\"value\":\"$(json_text "$3")\"}"
    else
        item="{\"key\":\"$2\",\"value\":\"$(json_text "$3")\"}"
    fi
    VERSIONS="${VERSIONS:+$VERSIONS,}$item"
}

check_memory() {  # sets MEMORY_OK (0/1), MEMORY_WORDS, DRIVER, VBIOSES (index=value lines), VERSIONS
    MEMORY_OK=1 MEMORY_WORDS="" DRIVER="" VBIOSES="" VERSIONS="" low=""
    count=0
    while IFS=, read -r index total free driver vbios inforom serial; do
        index=$(printf '%s' "$index" | tr -d ' ') total=$(printf '%s' "$total" | tr -d ' ') free=$(printf '%s' "$free" | tr -d ' ')
        driver=$(printf '%s' "$driver" | sed 's/^ *//;s/ *$//') vbios=$(printf '%s' "$vbios" | sed 's/^ *//;s/ *$//')
        inforom=$(printf '%s' "$inforom" | sed 's/^ *//;s/ *$//') serial=$(printf '%s' "$serial" | sed 's/^ *//;s/ *$//')
        case $index$total$free in '' | *[!0-9]*) note "probe line $(shown "$index,$total,$free")"; continue ;; esac
        [ "$total" -gt 0 ] || continue
        count=$((count + 1))
        share=$((free * 100 / total))
        if [ $((free * 100)) -lt $((BELVEDERE_PREFLIGHT_MIN_FREE * total)) ]; then
            MEMORY_OK=0
            low="${low:+$low; }GPU $index: $share % of $total MiB allocatable"
        fi
        [ -z "$DRIVER" ] && DRIVER=$driver && version_item "" driver "$driver"
        VBIOSES="$VBIOSES$index=$vbios$NL"
        version_item "$index" vbios "$vbios"
        version_item "$index" inforom_image "$inforom"
        version_item "$index" serial "$serial"
    done <<EOF
$GPUS
EOF
    if [ "$count" -eq 0 ]; then
        MEMORY_OK=0 MEMORY_WORDS="the probe listed no GPU it could read"
    elif [ "$MEMORY_OK" = 1 ]; then
        MEMORY_WORDS="all $count GPUs have at least $BELVEDERE_PREFLIGHT_MIN_FREE % of their memory allocatable"
    else
        MEMORY_WORDS="$low (at least $BELVEDERE_PREFLIGHT_MIN_FREE % required)"
    fi
}

expected() {  # $1: the /system/versions/ answer; $2: key -> its expected value, or nothing
    printf '%s' "$1" | tr -d '\n' | sed -n "s/.*\"expected\":{.*\"$2\":{\"value\":\"\\([^\"]*\\)\".*/\\1/p" | head -n 1
}

check_versions() {  # sets VERSIONS_STATUS (0 OK, 2 differs, 3 unknown) and VERSIONS_WORDS
    VERSIONS_STATUS=3 VERSIONS_WORDS="no expected set (partition unknown or portal not reached)"
    [ "$BELVEDERE_PREFLIGHT_VERSIONS" = 1 ] || { VERSIONS_WORDS="not checked (BELVEDERE_PREFLIGHT_VERSIONS=0)"; return; }
    partition=${SLURM_JOB_PARTITION:-}
    matches "$partition" "$PARTITION_RE" || return
    [ -n "$TOKEN" ] || return
    answer=$(printf 'header = "Authorization: Token %s"\n' "$TOKEN" |
        curl -q --config - --fail --silent --max-time "$BELVEDERE_TIMEOUT" --proto =http,https \
            --user-agent "$TAG/1" --header 'Accept: application/json' \
            "${BELVEDERE_URL%/}/api/v1/system/versions/?partition=$partition" 2>/dev/null) || return
    want_driver=$(expected "$answer" driver)
    want_vbios=$(expected "$answer" vbios)
    [ -n "$want_driver$want_vbios" ] || { VERSIONS_WORDS="partition $partition has no expected set yet"; return; }
    differs=""
    if [ -n "$want_driver" ] && [ -n "$DRIVER" ] && [ "$DRIVER" != "$want_driver" ]; then
        differs="driver $DRIVER, the partition runs $want_driver"
    fi
    if [ -n "$want_vbios" ]; then
        odd=$(printf '%s' "$VBIOSES" | grep -v "=$want_vbios\$" | grep . | head -n 4 | tr '\n' ' ')
        [ -n "$odd" ] && differs="${differs:+$differs; }VBIOS $odd(the partition runs $want_vbios)"
    fi
    if [ -n "$differs" ]; then
        VERSIONS_STATUS=2 VERSIONS_WORDS="$differs"
    else
        VERSIONS_STATUS=0 VERSIONS_WORDS="driver and VBIOS match partition $partition's expected set"
    fi
}

# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------
usage() {
    sed -n '2,28s/^# \{0,1\}//p' "$0"
}

for argument in "$@"; do
    case $argument in
        --print) MODE=print ;;
        --foreground) MODE=foreground ;;
        -h | --help) usage; exit 0 ;;
        *) printf '%s: unknown option %s (see --help)\n' "$TAG" "$(shown "$argument")" >&2; exit 2 ;;
    esac
done

load_config
[ "$BELVEDERE_PREFLIGHT" = off ] && exit 0
NODE=${SLURMD_NODENAME:-$(hostname -s 2>/dev/null)}
JOB_ID=${SLURM_JOB_ID:-${SLURM_JOBID:-}}
TOKEN=""
if [ "$MODE" != print ] && can_send && read_token "pre-flight of $NODE not reported"; then :; else TOKEN=""; fi

if probe; then
    check_memory
else
    MEMORY_OK=0 MEMORY_WORDS=$PROBLEM VERSIONS=""
fi
check_versions

[ "$MEMORY_OK" = 1 ] && memory_code=0 || memory_code=2
FAILED=0
reason=""
[ "$memory_code" = 0 ] || { FAILED=1; reason="GPU memory: $MEMORY_WORDS"; }
[ "$VERSIONS_STATUS" = 2 ] && { FAILED=1; reason="${reason:+$reason; }versions: $VERSIONS_WORDS"; }

now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
BODY="{\"source\":\"preflight\",\"protocol\":{\"name\":\"belvedere-preflight (min free $BELVEDERE_PREFLIGHT_MIN_FREE %, $BELVEDERE_PREFLIGHT)\"},\"started\":\"$now\",\"ended\":\"$now\""
matches "$JOB_ID" "$JOB_ID_RE" && BODY="$BODY,\"job_id\":$JOB_ID"
matches "$BELVEDERE_CLUSTER" "$CLUSTER_RE" && BODY="$BODY,\"cluster\":\"$BELVEDERE_CLUSTER\""
BODY="$BODY,\"results\":[{\"hostname\":\"$NODE\",\"check\":\"preflight_gpu_memory\",\"exit_code\":$memory_code,\"message\":\"$(json_text "$MEMORY_WORDS")\",\"metrics\":{\"min_free_percent\":$BELVEDERE_PREFLIGHT_MIN_FREE,\"versions\":[$VERSIONS]}},{\"hostname\":\"$NODE\",\"check\":\"preflight_versions\",\"exit_code\":$VERSIONS_STATUS,\"message\":\"$(json_text "$VERSIONS_WORDS")\"}]}"

if [ "$MODE" = print ]; then
    printf '%s\n' "$BODY"
    [ "$FAILED" = 1 ] && printf '%s: %s would fail: %s\n' "$TAG" "$NODE" "$reason" >&2
    exit 0
fi

SUMMARY="pre-flight of $NODE (job ${JOB_ID:-?})"
STATUS=0
if [ -n "$TOKEN" ]; then
    send 1
    sent=$?
    case $CODE in
        2??) log info "$(with_notes "reported $SUMMARY: $([ "$FAILED" = 1 ] && echo "failed: $reason" || echo passed)")" ;;
        *) send_failed "$sent" ""; STATUS=2 ;;
    esac
fi

if [ "$FAILED" = 1 ]; then
    log warning "$SUMMARY failed: $reason"
    if [ "$BELVEDERE_PREFLIGHT" = enforce ] && matches "$NODE" '[A-Za-z0-9][A-Za-z0-9._-]{0,63}'; then
        drain_reason=$(printf 'Belvedere pre-flight: %s' "$reason" | tr -c ' -~' '?' | head -c 200)
        if scontrol update "NodeName=$NODE" State=DRAIN "Reason=$drain_reason" 2>/dev/null; then
            log warning "drained $NODE: $drain_reason"
        else
            log err "could not drain $NODE (scontrol failed); failing the prolog drains it"
        fi
        cleanup
        exit 1  # a failed Prolog: Slurm requeues the job and keeps the node drained
    fi
    STATUS=1
fi
if [ "$MODE" = foreground ]; then
    cleanup
    exit "$STATUS"
fi
cleanup
exit 0
