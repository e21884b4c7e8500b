#!/bin/sh
# belvedere-post-flightrec.sh: post a job's PyTorch Flight Recorder dumps to Belvedere (issue 36), from
# the batch script: every file at the job's TORCH_NCCL_DEBUG_INFO_TEMP_FILE prefix (<prefix><rank>,
# pickle or JSON) as one .tar.gz to /api/v1/jobs/<cluster>/<job id>/flight-recorder/?format=tar.
#
# Run it after srun in the batch script (the "srun wrapper option"), e.g. for dumps on a shared
# file system that the node Epilog does not collect:
#     export TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_BUFFER_SIZE=2000
#     export TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/capstor/scratch/$USER/fr/$SLURM_JOB_ID/nccl_trace_rank_
#     mkdir -p "${TORCH_NCCL_DEBUG_INFO_TEMP_FILE%/*}"
#     srun ... python pretrain_gpt.py ...; status=$?
#     belvedere-post-flightrec.sh; exit $status
# On nodes whose Epilog collects dumps (BELVEDERE_FLIGHTREC_DIR, deploy/slurm/README.md) the TaskProlog
# sets the prefix and nothing needs to be added to the batch script.
#
# Reads: BELVEDERE_URL (the TaskProlog's BELVEDERE_JOB_URL is used when it is unset), SLURM_JOB_ID,
# BELVEDERE_CLUSTER or SLURM_CLUSTER_NAME, the prefix (BELVEDERE_FLIGHTREC_PREFIX, else
# TORCH_NCCL_DEBUG_INFO_TEMP_FILE; %j stands for the job id), the job's token (BELVEDERE_JOB_TOKEN,
# else the file BELVEDERE_JOB_TOKEN_FILE that the TaskProlog exports), BELVEDERE_FLIGHTREC_MAX_MB
# (default 2048: the most it sends; a dump over 64 MiB is left out, as the portal would refuse it)
# and BELVEDERE_FLIGHTREC_TIMEOUT (seconds, default 300).
#
# Only regular files of the user's own are sent (no links). One line on stderr says what happened.
# It never fails the job: whatever goes wrong (nothing to post, no token, the portal down or
# refusing), it exits 0. The token goes to curl on its standard input, never on its command line.
#
# POSIX sh; needs curl, GNU tar, stat, mktemp.
LC_ALL=C
export LC_ALL
TAG=belvedere-post-flightrec
say() { printf '%s: %s\n' "$TAG" "$1" >&2; }

job=${SLURM_JOB_ID:-}
case $job in '' | 0* | *[!0-9]*) say "not posting: SLURM_JOB_ID '$job' is not a job id"; exit 0 ;; esac
cluster=${BELVEDERE_CLUSTER:-${SLURM_CLUSTER_NAME:-}}
case $cluster in '' | *[!A-Za-z0-9_-]*) say "not posting: no valid cluster name (BELVEDERE_CLUSTER or SLURM_CLUSTER_NAME)"; exit 0 ;; esac
base_url=${BELVEDERE_URL:-}
if [ -z "$base_url" ] && [ -n "${BELVEDERE_JOB_URL:-}" ]; then
    base_url=${BELVEDERE_JOB_URL%%/jobs/*}
fi
case $base_url in
    http://?* | https://?*) ;;
    *) say "not posting: BELVEDERE_URL is not set to the portal's http(s):// address"; exit 0 ;;
esac
prefix=${BELVEDERE_FLIGHTREC_PREFIX:-${TORCH_NCCL_DEBUG_INFO_TEMP_FILE:-}}
[ -n "$prefix" ] || exit 0  # the job asked for no dumps
# %j: the job id (a prefix written for sbatch's own patterns)
while :; do
    case $prefix in *%j*) prefix="${prefix%%%j*}$job${prefix#*%j}" ;; *) break ;; esac
done
case $prefix in */*) dir=${prefix%/*}; dir=${dir:-/} ;; *) dir=. ;; esac
base=${prefix##*/}

max_mb=${BELVEDERE_FLIGHTREC_MAX_MB:-2048}
case $max_mb in '' | *[!0-9]* | 0) max_mb=2048 ;; esac
timeout=${BELVEDERE_FLIGHTREC_TIMEOUT:-300}
case $timeout in '' | *[!0-9]* | 0) timeout=300 ;; esac

# The dumps: regular files of ours at the prefix, in name order, within the caps.
names=""
count=0
bytes=0
skipped=0
budget=$((max_mb * 1048576))
for path in "$dir/$base"*; do
    [ -e "$path" ] || [ -h "$path" ] || continue
    name=${path##*/}
    size=""
    if [ -f "$path" ] && [ ! -h "$path" ] && [ -O "$path" ] && [ -r "$path" ]; then
        size=$(stat -c %s -- "$path" 2>/dev/null)
    fi
    case $name in *[!A-Za-z0-9._-]* | *.part | *.tmp) size="" ;; esac
    if [ -z "$size" ] || [ "$size" -gt 67108864 ] || [ $((bytes + size)) -gt "$budget" ]; then
        skipped=$((skipped + 1))
        continue
    fi
    names="$names$name
"
    count=$((count + 1))
    bytes=$((bytes + size))
done
left=""
[ "$skipped" -gt 0 ] && left=" ($skipped other file(s) left out: links, not yours, odd names, or past the size caps)"
if [ "$count" -eq 0 ]; then
    [ "$skipped" -gt 0 ] && say "no Flight Recorder dumps posted for job $job$left"
    exit 0
fi

token=${BELVEDERE_JOB_TOKEN:-}
if [ -z "$token" ] && [ -n "${BELVEDERE_JOB_TOKEN_FILE:-}" ] && [ -f "$BELVEDERE_JOB_TOKEN_FILE" ] && [ -r "$BELVEDERE_JOB_TOKEN_FILE" ]; then
    IFS= read -r token <"$BELVEDERE_JOB_TOKEN_FILE"
fi
case $token in
    bvj_?*) case $token in *[!A-Za-z0-9_-]*) token="" ;; esac ;;
    *) token="" ;;
esac
if [ -z "$token" ]; then
    say "not posting $count Flight Recorder dump(s) of job $job: no job token (BELVEDERE_JOB_TOKEN_FILE, set by the TaskProlog)"
    exit 0
fi

# A fresh directory of ours (mode 700) for the archive, curl's answer and errors: no guessable names in /tmp.
work=$(mktemp -d "${TMPDIR:-/tmp}/belvedere-flightrec.XXXXXX") || { say "not posting: no temporary directory"; exit 0; }
archive=$work/dumps.tar.gz
answer=$work/answer
trap 'rm -rf -- "$work"' EXIT
trap 'exit 0' HUP INT TERM
if ! printf '%s' "$names" | (cd -- "$dir" && tar -czf - --no-recursion -T -) >"$archive" 2>"$work/errors"; then
    say "not posting the Flight Recorder dumps of job $job: tar failed: $(head -c 200 "$work/errors" | tr -c '[:print:]' ' ')"
    exit 0
fi
url="${base_url%/}/api/v1/jobs/$cluster/$job/flight-recorder/?format=tar"
code=$(printf 'header = "Authorization: JobToken %s"\n' "$token" |
    curl -q --config - --silent --show-error --max-time "$timeout" --proto =http,https --user-agent "$TAG/1" \
        --header 'Content-Type: application/octet-stream' --header 'Accept: application/json' \
        --data-binary "@$archive" --output "$answer" --write-out '%{http_code}' "$url" 2>"$work/errors")
status=$?
detail=$(head -c 300 "$answer" 2>/dev/null | tr -c '[:print:]' ' ')
what="$count Flight Recorder dump(s) of job $job ($bytes bytes)$left"
case $code in
    2??) say "posted $what to $url: HTTP $code: $detail" ;;
    000 | '') say "failed to post $what to $url: no HTTP answer within ${timeout}s (curl status $status: $(head -c 200 "$work/errors" | tr -c '[:print:]' ' '))" ;;
    *) say "failed to post $what to $url: HTTP $code: $detail" ;;
esac
exit 0
