#!/usr/bin/env bash
# The positive control (issue 32) on one GPU host, in one command or two.
#
# usage: bash benchmarks/positive_control_gpu.sh WORK [STAGES] [BUDGET_S]
#   WORK      working directory on the host's disk (drafter weights live here, only here)
#   STAGES    all (default): prepare, check, trace, analyze, study, pack
#             prepare: prompts + generate + finetune + check, then pack
#             generate: prompts + generate (training and held-out answers), then pack:
#                      the first of two commands; its $OUT comes back and is carried in
#             train:   restore what `generate` packed (FROM=that $OUT), finetune, check,
#                      trace, analyze + study if time is left, pack: the second command
#             trace:   traces, then analyze + study if time is left, then pack
#             finish:  analyze + study + pack      pack: pack only
#   The check (held-out top-1 agreement with the target, before any trace) stops the
#   command with exit status 3 and traces nothing when the planted ordering is absent.
#   BUDGET_S  seconds this command may take in all (default 560)
# environment:
#   TOKENLENS_CACHE  the tokenlens cache: models/qwen2.5-coder-1.5b-instruct and
#                    models/qwen2.5-coder-0.5b-instruct (`tokenlens models ensure`)
#   OUT              where the results go (tarballs, study.json; never weights)
#   TL               the tokenlens command (default: python3 -m tokenlens)
#   PY               python (default: python3)
#   COMMIT           the checkout's commit, recorded where there is no .git
#   TRACE_RESERVE_S  seconds kept for the traces by `all` (default 250)
#   PC_OPTIONS       more options for benchmarks/positive_control.py (e.g. "--tokens 500000")
#   ANALYZE          0: the trace stages skip analyze (run it on the CPU afterwards)
#   FROM             train: the folder holding control-training.tgz and
#                    control-generations.jsonl.gz from a `generate` command
set -uo pipefail
export PYTHONUNBUFFERED=1
WORK=${1:?usage: positive_control_gpu.sh WORK [STAGES] [BUDGET_S]}
STAGES=${2:-all}
BUDGET=${3:-560}
PY=${PY:-python3}
TL=${TL:-python3 -m tokenlens}
OUT=${OUT:?set OUT}
CACHE=${TOKENLENS_CACHE:?set TOKENLENS_CACHE}
TARGET=$CACHE/models/qwen2.5-coder-1.5b-instruct
DRAFTER=$CACHE/models/qwen2.5-coder-0.5b-instruct
HERE=$(cd "$(dirname "$0")" && pwd)
T_START=$(date +%s)
mkdir -p "$WORK" "$OUT"

say() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - T_START ))s] $*"; }
left() { echo $(( BUDGET - ($(date +%s) - T_START) )); }
pc() {  # pc STAGE BUDGET [options...]; returns the stage's exit status
  local stage=$1 budget=$2 rc; shift 2
  say "positive_control.py $stage (budget ${budget} s)"
  # shellcheck disable=SC2086
  $PY "$HERE/positive_control.py" "$stage" --work "$WORK" --budget-s "$budget" \
    --target "$TARGET" --drafter "$DRAFTER" --tl "$TL" ${COMMIT:+--commit "$COMMIT"} \
    ${PC_OPTIONS:-} "$@" 2>&1 | tee -a "$WORK/logs/driver.log"
  rc=${PIPESTATUS[0]}
  say "positive_control.py $stage: rc=$rc"
  return "$rc"
}

checked() {  # the manipulation check; on failure pack what there is and stop (exit 3)
  if ! pc check 120; then
    say "manipulation check failed or did not run: no traces (see training/records.json)"
    pack; exit 3
  fi
}

restore() {  # unpack a `generate` command's $OUT (FROM) into WORK
  local from=${FROM:?set FROM to the OUT of the generate command}
  from=$(cd "$from" && pwd) || exit 1
  tar -xzf "$from/control-training.tgz" -C "$WORK" --strip-components=1 --wildcards "*/training/*" || exit 1
  gunzip -c "$from/control-generations.jsonl.gz" > "$WORK/training/generations.jsonl" || exit 1
  if grep -q '"drafters"' "$WORK/training/records.json" 2>/dev/null; then
    # a finished run's records (FROM a committed run): kept aside, this run starts its own
    mv "$WORK/training/records.json" "$WORK/training/records-restored.json"
    say "kept $FROM's training records aside as training/records-restored.json"
  fi
  say "restored $(wc -l < "$WORK/training/generations.jsonl") generations from $from"
}

traces() {  # trace, then analyze if time is left, study, pack
  pc trace $(( $(left) - ${1:-30} ))
  if [ "${ANALYZE:-1}" = 1 ] && [ "$(left)" -gt 100 ]; then pc analyze $(( $(left) - 30 )) --jobs 4; fi
  pc study 20; pack
}

pack() {
  say "pack into $OUT"
  local w; w=$(basename "$WORK")
  ( cd "$(dirname "$WORK")" || exit 1
    [ -d "$w/runs" ] && tar -czf "$OUT/control-runs.tgz" --exclude='*/capture' --exclude='*.safetensors' "$w/runs"
    caps=$(cd "$w" && find runs -maxdepth 2 -name capture -type d 2>/dev/null | sed "s|^|$w/|")
    # shellcheck disable=SC2086
    [ -n "$caps" ] && tar -czf "$OUT/control-capture.tgz" --exclude='*.safetensors' $caps
    tar -czf "$OUT/control-training.tgz" --exclude='generations.jsonl' "$w/training" "$w/logs" 2>/dev/null
    [ -f "$w/training/generations.jsonl" ] && gzip -c "$w/training/generations.jsonl" > "$OUT/control-generations.jsonl.gz"
    [ -d "$w/analyses" ] && tar -czf "$OUT/control-analyses.tgz" --exclude='tokens.parquet' \
      --exclude='outputs.parquet' "$w/analyses"
    [ -f "$w/study.json" ] && cp "$w/study.json" "$OUT/study.json"
  )
  find "$OUT" -name '*.safetensors' -delete
  ls -la "$OUT"
  for f in "$OUT"/*; do
    [ "$(stat -c %s "$f")" -gt 16000000 ] && say "WARNING: $f is over 16 MB and will not come back"
  done
}

mkdir -p "$WORK/logs"
say "stages=$STAGES budget=$BUDGET work=$WORK target=$TARGET drafter=$DRAFTER"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>/dev/null
case $STAGES in
  all)
    pc prepare $(( $(left) - ${TRACE_RESERVE_S:-250} ))
    checked; traces 30 ;;
  prepare) pc prepare $(( $(left) - 150 )); checked; pack ;;
  generate) pc prompts 30; pc generate $(( $(left) - 30 )); pack ;;
  train)
    restore
    pc finetune $(( $(left) - ${TRACE_RESERVE_S:-250} ))
    checked; traces 30 ;;
  trace) traces 90 ;;
  finish) pc analyze $(( $(left) - 30 )) --jobs 4; pc study 20; pack ;;
  pack) pack ;;
  *) echo "unknown STAGES $STAGES" >&2; exit 2 ;;
esac
nvidia-smi --query-gpu=memory.used --format=csv,noheader 2>/dev/null
say "done"
