#!/bin/sh
# Post a job's PyTorch Flight Recorder dumps to Belvedere (issue 36): every file at the job's
# TORCH_NCCL_DEBUG_INFO_TEMP_FILE prefix (<prefix><rank>, pickle or JSON) as one .tar.gz.
#
# Run it after srun in the batch script (the "srun wrapper option"):
#     export TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_BUFFER_SIZE=2000
#     export TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/capstor/scratch/$USER/fr/$SLURM_JOB_ID/nccl_trace_rank_
#     srun ... python pretrain_gpt.py ...; status=$?
#     deploy/flightrec/belvedere-post-flightrec.sh; exit $status
# (The node epilog, deploy/slurm/belvedere-epilog.sh, does not call it yet: it removes the job token first.)
#
# Needs: BELVEDERE_URL, SLURM_JOB_ID, the prefix (TORCH_NCCL_DEBUG_INFO_TEMP_FILE or BELVEDERE_FLIGHTREC_PREFIX, where
# %j stands for the job id), and the job's token (BELVEDERE_JOB_TOKEN, or the file BELVEDERE_JOB_TOKEN_FILE).
# Nothing to post is not an error; a refused dump is reported and the script still exits 0 (never fail the job).
set -u
prefix="${BELVEDERE_FLIGHTREC_PREFIX:-${TORCH_NCCL_DEBUG_INFO_TEMP_FILE:-}}"
[ -n "$prefix" ] || exit 0
job="${SLURM_JOB_ID:?SLURM_JOB_ID is not set}"
cluster="${BELVEDERE_CLUSTER:-${SLURM_CLUSTER_NAME:-alps}}"
prefix=$(printf '%s' "$prefix" | sed "s/%j/$job/g")
dir=$(dirname -- "$prefix")
base=$(basename -- "$prefix")
ls "$dir"/"$base"* >/dev/null 2>&1 || exit 0
token="${BELVEDERE_JOB_TOKEN:-}"
if [ -z "$token" ] && [ -n "${BELVEDERE_JOB_TOKEN_FILE:-}" ] && [ -r "$BELVEDERE_JOB_TOKEN_FILE" ]; then
    token=$(cat "$BELVEDERE_JOB_TOKEN_FILE")
fi
[ -n "$token" ] || { echo "belvedere-post-flightrec: no job token; not posting" >&2; exit 0; }
archive=$(mktemp "${TMPDIR:-/tmp}/flightrec.XXXXXX")
trap 'rm -f "$archive"' EXIT
(cd "$dir" && find . -maxdepth 1 -type f -name "$base*" ! -name '*.part' -print0 | tar --null -czf "$archive" -T -) || exit 0
curl --silent --show-error --fail-with-body --max-time 300 -X POST \
    -H "Authorization: JobToken $token" -H "Content-Type: application/gzip" --data-binary "@$archive" \
    "${BELVEDERE_URL%/}/api/v1/jobs/$cluster/$job/flight-recorder/?format=tar" \
    || echo "belvedere-post-flightrec: the portal refused or did not answer (see above)" >&2
exit 0
