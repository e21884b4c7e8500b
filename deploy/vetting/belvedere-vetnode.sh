#!/usr/bin/env bash
# belvedere-vetnode.sh — vet this job's nodes with vetnode and record the results in Belvedere.
#
# Run it from a batch script, once (not under srun); it runs vetnode on every node itself:
#
#   belvedere-vetnode.sh --config config.yaml --exclude-file cordoned.txt
#   srun -N "$WORKERS" --exclude=./cordoned.txt python train.py
#
# It runs, by default,
#   srun --ntasks-per-node=<GPUs per node> --kill-on-bad-exit=0 vetnode diagnose --verbose CONFIG
# or the command given after `--` (e.g. with --environment=... for a container), shows vetnode's
# output as usual, posts it to the job's page in Belvedere with the job's token, prints the
# verdict and the run's address, and writes the nodes that failed (one per line) to the exclude
# file. It exits with vetnode's exit status. Posting never fails the job: when the portal cannot
# be reached the failed nodes are read from vetnode's output here instead.
#
# Where Belvedere is: the site's TaskProlog exports BELVEDERE_JOB_URL and BELVEDERE_JOB_TOKEN_FILE
# into every job (deploy/slurm/README.md); --portal, --cluster and --token-file override them.
set -u

usage() {
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    echo
    echo "options: --config FILE  --exclude-file FILE  --protocol-name NAME  --portal URL  --cluster NAME"
    echo "         --token-file FILE  --no-post  [-- COMMAND...]"
}

CONFIG="" EXCLUDE_FILE="" PROTOCOL_NAME="" PORTAL="" CLUSTER="" TOKEN_FILE=${BELVEDERE_JOB_TOKEN_FILE:-} POST=1
while [ $# -gt 0 ]; do
    case "$1" in
        --config) CONFIG=${2:-}; shift 2 ;;
        --exclude-file) EXCLUDE_FILE=${2:-}; shift 2 ;;
        --protocol-name) PROTOCOL_NAME=${2:-}; shift 2 ;;
        --portal) PORTAL=${2:-}; shift 2 ;;
        --cluster) CLUSTER=${2:-}; shift 2 ;;
        --token-file) TOKEN_FILE=${2:-}; shift 2 ;;
        --no-post) POST=0; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        *) echo "belvedere-vetnode: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

say() { printf 'belvedere-vetnode: %s\n' "$*" >&2; }

if [ $# -gt 0 ]; then
    COMMAND=("$@")
elif [ -n "$CONFIG" ]; then
    COMMAND=(srun "--ntasks-per-node=${BELVEDERE_VETNODE_TASKS_PER_NODE:-${SLURM_GPUS_ON_NODE:-4}}" --kill-on-bad-exit=0
             "${VETNODE:-vetnode}" diagnose --verbose "$CONFIG")
else
    say "give --config FILE (vetnode's protocol) or the command to run after --"
    exit 2
fi
if [ -n "$CONFIG" ] && [ ! -r "$CONFIG" ]; then
    say "cannot read the protocol $CONFIG"
    exit 2
fi

# The protocol's name (its `name:` line) and hash, so the portal can group runs of one protocol.
PROTOCOL_HASH=""
if [ -n "$CONFIG" ]; then
    [ -n "$PROTOCOL_NAME" ] || PROTOCOL_NAME=$(sed -n 's/^name:[[:space:]]*//p' "$CONFIG" | head -n 1 | tr -d "\"'")
    PROTOCOL_HASH=$(sha256sum "$CONFIG" 2>/dev/null | cut -d' ' -f1)
fi

OUTPUT=$(mktemp "${TMPDIR:-/tmp}/belvedere-vetnode.XXXXXX") || { say "cannot create a temporary file"; exit 2; }
ANSWER="$OUTPUT.answer"
trap 'rm -f "$OUTPUT" "$ANSWER"' EXIT

# vetnode's output goes to the job's output as always, and to a file for the portal.
"${COMMAND[@]}" 2>&1 | tee "$OUTPUT"
STATUS=${PIPESTATUS[0]}

# Which nodes failed, from vetnode's own output (used when the portal cannot answer).
failed_from_output() {
    {
        grep -ao '\[[^][ ]*-[0-9]*: \{0,1\}Cordon\]' "$OUTPUT" | sed 's/^\[\(.*\)-[0-9]*: \{0,1\}Cordon\]$/\1/'
        grep -a '^\([0-9]*: \)\{0,1\}Cordon: ' "$OUTPUT" | sed 's/^.*Cordon: //'
        grep -a '^| [^ |]* |.*❌' "$OUTPUT" | sed 's/^| \([^ |]*\) .*/\1/'
    } | sed 's/[[:space:]]*$//' | sort -u
}

FAILED=""
if [ "$POST" = 1 ]; then
    URL=${PORTAL:-}
    JOB_URL=${BELVEDERE_JOB_URL:-}
    if [ -z "$URL" ] && [ -n "$JOB_URL" ]; then
        URL=${JOB_URL%%/jobs/*}
        [ -n "$CLUSTER" ] || CLUSTER=$(printf '%s' "$JOB_URL" | sed -n 's|.*/jobs/\([^/]*\)/.*|\1|p')
    fi
    TOKEN=""
    if [ -n "$TOKEN_FILE" ] && [ -r "$TOKEN_FILE" ]; then
        TOKEN=$(tr -d '[:space:]' < "$TOKEN_FILE")
    fi
    if [ -z "$URL" ] || [ -z "$TOKEN" ]; then
        say "not posting: no portal address or job token (BELVEDERE_JOB_URL, BELVEDERE_JOB_TOKEN_FILE; see deploy/slurm/README.md)"
    elif ! command -v curl >/dev/null 2>&1; then
        say "not posting: curl is not installed"
    else
        QUERY="format=vetnode&job=${SLURM_JOB_ID:-}&cluster=${CLUSTER}"
        [ -n "$PROTOCOL_NAME" ] && QUERY="$QUERY&protocol=$(printf '%s' "$PROTOCOL_NAME" | sed 's/[^A-Za-z0-9._-]/_/g')"
        [ -n "$PROTOCOL_HASH" ] && QUERY="$QUERY&protocol_hash=$PROTOCOL_HASH"
        CODE=$(curl --silent --show-error --max-time 60 --retry 3 --retry-connrefused --output "$ANSWER" --write-out '%{http_code}' \
                    -H "Authorization: JobToken $TOKEN" -H "Content-Type: text/plain; charset=utf-8" \
                    --data-binary "@$OUTPUT" "$URL/api/v1/vetting/import/?$QUERY" 2>&1) || CODE="curl: $CODE"
        if [ "$CODE" = 201 ]; then
            if command -v python3 >/dev/null 2>&1; then
                FAILED=$(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["failed_hosts"]))' "$ANSWER" 2>/dev/null)
                RUN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$ANSWER" 2>/dev/null)
                say "recorded in Belvedere: $URL$RUN"
            else
                say "recorded in Belvedere"
                FAILED=$(failed_from_output)
            fi
        else
            say "the portal did not take the results ($CODE): $(head -c 400 "$ANSWER" 2>/dev/null)"
        fi
    fi
fi
[ -n "$FAILED" ] || FAILED=$(failed_from_output)

if [ -n "$FAILED" ]; then
    say "nodes that failed vetting: $(printf '%s' "$FAILED" | tr '\n' ' ')"
else
    say "every node passed vetting"
fi
if [ -n "$EXCLUDE_FILE" ]; then
    if [ -n "$FAILED" ]; then printf '%s\n' "$FAILED" > "$EXCLUDE_FILE"; else : > "$EXCLUDE_FILE"; fi
fi
exit "$STATUS"
