#!/bin/sh
# belvedere-taskprolog.sh: Slurm TaskProlog that stamps the job's Belvedere URL into its output.
#
# slurmstepd runs it as the job's user before every task of every step (the batch script
# included). What it prints on stdout is read by slurmstepd, one line at a time:
#   print TEXT         TEXT goes to the task's stdout (for the batch step: the job's output file)
#   export NAME=VALUE  sets NAME in the task's environment
# Any other line is ignored. It prints
#   print Belvedere: <BELVEDERE_URL>/jobs/<cluster>/<job id>/
# once per job: in the batch step; in an allocation without a batch script (salloc, a bare
# srun), in task 0 of the first step (step 0, or Slurm's interactive step). With a readable
# per-job token file <BELVEDERE_JOB_TOKEN_DIR>/job-<job id>.token it also prints, in every task,
#   export BELVEDERE_JOB_TOKEN_FILE=<that file>
#   export BELVEDERE_JOB_URL=<the job's URL>
# so that code in the job can find its token and page. With BELVEDERE_FLIGHTREC_DIR set and the
# job's folder <that dir>/<job id> made by the Prolog (a directory of this user's, not a link),
# it prints, in every task, unless the job's environment already sets them,
#   export TORCH_NCCL_DEBUG_INFO_TEMP_FILE=<that dir>/<job id>/nccl_trace_rank_
#   export TORCH_NCCL_DUMP_ON_TIMEOUT=1
#   export TORCH_FR_BUFFER_SIZE=2000      (neither it nor TORCH_NCCL_TRACE_BUFFER_SIZE set)
# so that PyTorch's Flight Recorder dumps land where the Epilog collects and posts them.
#
# A TaskProlog that fails cancels the task, and a slow one delays every task, so this script:
# always exits 0 (no `set -e`; every problem just means "print nothing"), runs shell builtins
# only (no exec; one fork, to make a CR, when there is a settings file), does no network I/O,
# and sends its own errors to /dev/null.
#
# Settings: NAME=value lines in /etc/belvedere/taskprolog.env (another file: the environment
# variable BELVEDERE_TASKPROLOG_CONF). The file is parsed, never sourced; `export ` and one pair
# of quotes are allowed, `#` starts a comment line; unknown names and garbage are ignored.
#   BELVEDERE_URL            the portal, e.g. https://belvedere.example.org (unset: nothing printed)
#   BELVEDERE_CLUSTER        the cluster's name in the portal (default: $SLURM_CLUSTER_NAME)
#   BELVEDERE_JOB_TOKEN_DIR  where the per-job token files are (default: /run/belvedere)
#   BELVEDERE_FLIGHTREC_DIR  where the Prolog makes each job's Flight Recorder folder (unset: none)
# These four are taken from the file only, never from the job's environment (which is the
# user's): a stray BELVEDERE_URL in someone's shell must not change the banner.
#
# POSIX sh (dash, bash, busybox ash). See deploy/slurm/README.md and slurm.conf.snippet.

exec 2>/dev/null
LC_ALL=C
export LC_ALL

CONF=${BELVEDERE_TASKPROLOG_CONF:-/etc/belvedere/taskprolog.env}
BELVEDERE_URL=
BELVEDERE_CLUSTER=
BELVEDERE_JOB_TOKEN_DIR=/run/belvedere
BELVEDERE_FLIGHTREC_DIR=

# --- settings file (at most 200 lines; parsed with builtins) --------------------------------
if [ -f "$CONF" ] && [ -r "$CONF" ]; then
    CR=$(printf '\r')                         # the only fork, and only with a settings file
    n=0
    line=
    while [ "$n" -lt 200 ] && IFS= read -r line || [ -n "$line" ]; do
        n=$((n + 1))
        line=${line#"${line%%[! 	]*}"}          # leading blanks
        line=${line%"$CR"}                      # a DOS editor's CR
        line=${line%"${line##*[! 	]}"}          # trailing blanks
        case $line in
            ''|'#'*) line=; continue ;;
            'export '*) line=${line#export } ;;
        esac
        name=${line%%=*}
        [ "$name" = "$line" ] && { line=; continue; }
        value=${line#*=}
        case $value in
            \"*\") value=${value#\"}; value=${value%\"} ;;
            \'*\') value=${value#\'}; value=${value%\'} ;;
        esac
        case $name in
            BELVEDERE_URL) BELVEDERE_URL=$value ;;
            BELVEDERE_CLUSTER) BELVEDERE_CLUSTER=$value ;;
            BELVEDERE_JOB_TOKEN_DIR) BELVEDERE_JOB_TOKEN_DIR=$value ;;
            BELVEDERE_FLIGHTREC_DIR) BELVEDERE_FLIGHTREC_DIR=$value ;;
        esac
        line=
    done < "$CONF"
fi

# --- validate everything that goes into a printed line ---------------------------------------
JOB_ID=${SLURM_JOB_ID:-${SLURM_JOBID:-}}
case $JOB_ID in
    ''|0*|*[!0-9]*) exit 0 ;;
esac
[ "${#JOB_ID}" -le 12 ] || exit 0

# The job's URL; empty (no banner, no BELVEDERE_JOB_URL) when the URL or cluster name is unusable.
JOB_URL=
CLUSTER=${BELVEDERE_CLUSTER:-${SLURM_CLUSTER_NAME:-}}
case $CLUSTER in
    ''|[!A-Za-z0-9]*|*[!A-Za-z0-9_-]*) CLUSTER= ;;
esac
[ "${#CLUSTER}" -le 64 ] || CLUSTER=
BASE=$BELVEDERE_URL
while :; do
    case $BASE in */) BASE=${BASE%/} ;; *) break ;; esac
done
case $BASE in
    http://?*|https://?*)
        case ${BASE#*://} in
            [!A-Za-z0-9]*|*[!A-Za-z0-9._~:/-]*) BASE= ;;  # no blanks, quotes, ?, #, @, %, control characters
        esac ;;
    *) BASE= ;;
esac
[ "${#BASE}" -le 512 ] || BASE=
if [ -n "$BASE" ] && [ -n "$CLUSTER" ]; then
    JOB_URL="$BASE/jobs/$CLUSTER/$JOB_ID/"
fi

# --- which step is this? ----------------------------------------------------------------------
# Observed with Slurm 22.05.8 (a test cluster, tests/slurm_cluster.py): in the batch step the TaskProlog
# gets NO SLURM_STEP_ID/SLURM_STEPID at all (neither "batch" nor 4294967291), while srun steps
# get their number (0, 1, ...). But a SLURM_STEP_ID in the submitting shell (sbatch run from
# inside an `srun --pty bash` session) leaks into the batch step's environment unchanged, so the
# environment alone is not trustworthy. The process that runs this script is the task forked by
# slurmstepd, whose process title is "slurmstepd: [<job>.batch]" for the batch step and
# "slurmstepd: [<job>.<step>]" for the others (seen: "[5.batch]", "[5.0]"; Slurm's interactive
# step, LaunchParameters=use_interactive_step, should read "[<job>.interactive]": not tried).
# Read that first, and fall back to the environment when /proc is not readable.
STEP=
TITLE=
if [ -r "/proc/$PPID/cmdline" ]; then
    IFS= read -r TITLE < "/proc/$PPID/cmdline"
fi
case $TITLE in
    "slurmstepd: ["*.*"]"*)
        STEP=${TITLE#*\[}
        STEP=${STEP%%\]*}
        STEP=${STEP##*.}
        ;;
esac
if [ -z "$STEP" ]; then
    STEP=${SLURM_STEP_ID-${SLURM_STEPID-}}
    case $STEP in
        ''|batch|4294967291) STEP='batch' ;;
        interactive|4294967290) STEP='interactive' ;;
        extern|4294967292) STEP='extern' ;;
    esac
fi

PRINT=0
case $STEP in
    batch)
        PRINT=1 ;;
    0|interactive)
        # An allocation without a batch script: task 0 of its first step. In a batch job every
        # step inherits ENVIRONMENT=BATCH from the batch script (slurmd sets it there), so its
        # steps print nothing (only `srun --export=NONE` loses it: that step 0 prints again).
        if [ "${SLURM_PROCID:-0}" = 0 ] && [ "${ENVIRONMENT:-}" != BATCH ]; then
            PRINT=1
        fi ;;
esac
if [ "$PRINT" = 1 ] && [ -n "$JOB_URL" ]; then
    printf 'print Belvedere: %s\n' "$JOB_URL"
fi

# --- the job's token, when the portal's Prolog left one ---------------------------------------
TOKEN_DIR=$BELVEDERE_JOB_TOKEN_DIR
while :; do
    case $TOKEN_DIR in ?*/) TOKEN_DIR=${TOKEN_DIR%/} ;; *) break ;; esac
done
case $TOKEN_DIR in
    /*) case $TOKEN_DIR in *[!A-Za-z0-9._/-]*) TOKEN_DIR= ;; esac ;;
    *) TOKEN_DIR= ;;
esac
if [ -n "$TOKEN_DIR" ]; then
    TOKEN_FILE="$TOKEN_DIR/job-$JOB_ID.token"
    if [ -f "$TOKEN_FILE" ] && [ -r "$TOKEN_FILE" ]; then
        printf 'export BELVEDERE_JOB_TOKEN_FILE=%s\n' "$TOKEN_FILE"
        [ -n "$JOB_URL" ] && printf 'export BELVEDERE_JOB_URL=%s\n' "$JOB_URL"
    fi
fi

# --- the job's Flight Recorder folder, when the Prolog made one ---------------------------------
# Only the job's own folder (this user's, not a link: a folder someone else made there is not
# used), and never over what the job set itself (a prefix of its own, or no dumps on timeout).
FR_DIR=$BELVEDERE_FLIGHTREC_DIR
while :; do
    case $FR_DIR in ?*/) FR_DIR=${FR_DIR%/} ;; *) break ;; esac
done
case $FR_DIR in
    /*) case $FR_DIR in *[!A-Za-z0-9._/-]*) FR_DIR= ;; esac ;;
    *) FR_DIR= ;;
esac
if [ -n "$FR_DIR" ] && [ -z "${TORCH_NCCL_DEBUG_INFO_TEMP_FILE+set}" ] && [ -d "$FR_DIR/$JOB_ID" ] &&
    [ ! -h "$FR_DIR/$JOB_ID" ] && [ -O "$FR_DIR/$JOB_ID" ]; then
    printf 'export TORCH_NCCL_DEBUG_INFO_TEMP_FILE=%s\n' "$FR_DIR/$JOB_ID/nccl_trace_rank_"
    [ -z "${TORCH_NCCL_DUMP_ON_TIMEOUT+set}" ] && printf 'export TORCH_NCCL_DUMP_ON_TIMEOUT=1\n'
    if [ -z "${TORCH_FR_BUFFER_SIZE+set}" ] && [ -z "${TORCH_NCCL_TRACE_BUFFER_SIZE+set}" ]; then
        printf 'export TORCH_FR_BUFFER_SIZE=2000\n'
    fi
fi
exit 0
