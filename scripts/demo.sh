#!/usr/bin/env bash
# make demo: run this repository's own workflow end to end on the embedded
# default. Starts kici-orchestrator on a temporary data directory (SQLite,
# local log storage, process auto-scaler), registers this repository as a
# local source, triggers a push run at HEAD, streams the logs live, prints a
# summary and stops everything it started. Exits 0 only if the run succeeded.
#
# If tracked files have uncommitted changes, the run uses a snapshot: a
# throwaway clone of HEAD with those changes applied and the lock file
# recompiled, so an edited workflow is what runs. This repository is never
# modified.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$ROOT/bin"
DEMO_DIR="$(mktemp -d "${TMPDIR:-/tmp}/kici-demo.XXXXXX")"
export KICI_DATA_DIR="$DEMO_DIR/data"
# Every job gets a fresh HOME of its own (passed on to the agents the
# orchestrator spawns): build state carries over only through the caches
# .kici/workflows/ci.yaml declares, which the second run restores.
export KICI_AGENT_JOB_HOME=true
ORCH_PID=""

RUN_ID=""
WS_URL=""

# leftovers prints the pids of processes this demo started that still run:
# agents (they carry this orchestrator's URL) and job steps (they carry the
# run id).
leftovers() {
  local f pid
  for f in /proc/[0-9]*/environ; do
    pid="${f#/proc/}"; pid="${pid%/environ}"
    [ "$pid" = "$$" ] && continue
    if env_of "$f" | grep -qxF -e "KICI_ORCHESTRATOR_URL=${WS_URL:-none}" -e "KICI_RUN_ID=${RUN_ID:-none}"; then
      echo "$pid"
    fi
  done
}

env_of() { { tr '\0' '\n' <"$1"; } 2>/dev/null || true; }

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# run_of DELIVERY: the id of the run a delivery created.
run_of() {
  local id=""
  for _ in $(seq 1 100); do
    id="$("$ADMIN" runs list --delivery-id "$1" --quiet | head -n1 || true)"
    [ -n "$id" ] && break
    sleep 0.2
  done
  [ -n "$id" ] || { echo "no run was created for delivery $1" >&2; exit 1; }
  echo "$id"
}

cleanup() {
  local code=$?
  if [ -n "$ORCH_PID" ] && kill -0 "$ORCH_PID" 2>/dev/null; then
    say "stopping the orchestrator (and the agents it started)"
    kill -TERM "$ORCH_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$ORCH_PID" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$ORCH_PID" 2>/dev/null || true
    wait "$ORCH_PID" 2>/dev/null || true
  fi
  # Anything still running from this demo's data dir is a bug; report and stop it.
  local left
  left="$(leftovers)"
  if [ -n "$left" ]; then
    echo "kici demo: processes left running, stopping them: $left" >&2
    kill -KILL $left 2>/dev/null || true
    code=1
  fi
  if [ "$code" -eq 0 ]; then rm -rf "$DEMO_DIR"; else echo "demo files kept in $DEMO_DIR (orchestrator log: $KICI_DATA_DIR/orchestrator.log)"; fi
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for b in kici-orchestrator kici-agent kici-step-supervisor kici-admin kici; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b: run make build" >&2; exit 1; }
done

SRC="$ROOT"
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]; then
  say "uncommitted changes found: running them from a snapshot of HEAD + your changes"
  SRC="$DEMO_DIR/snapshot"
  git clone -q --no-hardlinks "$ROOT" "$SRC"
  git -C "$ROOT" diff HEAD --binary | git -C "$SRC" apply --whitespace=nowarn
  (cd "$SRC" && "$BIN/kici" compile >/dev/null)
  git -C "$SRC" add -A
  git -C "$SRC" -c user.name="kici demo" -c user.email="demo@kici.invalid" commit -qm "demo snapshot of uncommitted changes"
fi
SHA="$(git -C "$SRC" rev-parse HEAD)"
REF="$(git -C "$SRC" symbolic-ref --short -q HEAD || echo main)"

say "checking the lock file is up to date"
(cd "$SRC" && "$BIN/kici" compile --check)

say "starting kici-orchestrator (embedded default, data in $KICI_DATA_DIR)"
mkdir -p "$KICI_DATA_DIR"
KICI_PORT=0 "$BIN/kici-orchestrator" >"$KICI_DATA_DIR/orchestrator.log" 2>&1 &
ORCH_PID=$!
for _ in $(seq 1 150); do
  [ -s "$KICI_DATA_DIR/orchestrator.json" ] && break
  kill -0 "$ORCH_PID" 2>/dev/null || { cat "$KICI_DATA_DIR/orchestrator.log" >&2; exit 1; }
  sleep 0.1
done
[ -s "$KICI_DATA_DIR/orchestrator.json" ] || { echo "orchestrator did not start" >&2; cat "$KICI_DATA_DIR/orchestrator.log" >&2; exit 1; }
URL="$(sed -n 's/.*"url": *"\([^"]*\)".*/\1/p' "$KICI_DATA_DIR/orchestrator.json")"
WS_URL="ws://${URL#http://}/ws"
echo "    listening on $URL"

ADMIN="$BIN/kici-admin"
say "registering $SRC as a local source"
SOURCE_ID="$("$ADMIN" source add local --org demo --path "$SRC" --name kici --quiet)"
echo "    source $SOURCE_ID"

say "triggering a push run at $REF@${SHA:0:12}"
FIRST_START=$SECONDS
DELIVERY="$("$ADMIN" source trigger-local "$SOURCE_ID" --ref "$REF" --sha "$SHA" --quiet)"
echo "    delivery $DELIVERY"

RUN_ID="$(run_of "$DELIVERY")"
echo "    run $RUN_ID"

say "streaming logs"
"$ADMIN" runs logs "$RUN_ID" --follow || true

say "summary"
"$ADMIN" runs summary "$RUN_ID"
"$ADMIN" runs wait "$RUN_ID" --timeout 10m
FIRST_TOOK=$((SECONDS - FIRST_START))

say "second run at the same commit: each job restores the caches the first run saved"
SECOND_START=$SECONDS
DELIVERY="$("$ADMIN" source trigger-local "$SOURCE_ID" --ref "$REF" --sha "$SHA" --quiet)"
RUN_ID="$(run_of "$DELIVERY")"
echo "    run $RUN_ID"
# As long as the first run may take (its logs were followed without a limit).
"$ADMIN" runs wait "$RUN_ID" --timeout 60m >/dev/null || { "$ADMIN" runs summary "$RUN_ID"; exit 1; }
SECOND_TOOK=$((SECONDS - SECOND_START))
"$ADMIN" runs summary "$RUN_ID"
RESTORED="$("$ADMIN" runs logs "$RUN_ID" | grep -E 'Cache [^ ]+ restored' || true)"
if [ -z "$RESTORED" ]; then
  echo "kici demo: the second run restored none of the caches .kici/workflows/ci.yaml declares" >&2
  "$ADMIN" runs logs "$RUN_ID" | grep -E 'Cache ' >&2 || true
  exit 1
fi
say "the second run restored $(printf '%s\n' "$RESTORED" | wc -l) caches declared in .kici/workflows/ci.yaml:"
printf '%s\n' "$RESTORED" | sed 's/^/    /'
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
say "trigger to finish: first run $(mmss "$FIRST_TOOK"), second run with the caches restored $(mmss "$SECOND_TOOK")"
