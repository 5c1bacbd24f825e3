# traces.sh NAME:ARGS... : trace the full study's 120 prompts once per NAME, all engines in
# parallel on the one GPU (each takes a share of its memory), then tar each run into $OUT.
# e.g. traces.sh "dm3-bf16:--method draft_model --k 3 --dtype bfloat16"
# Engines that start side by side on one GPU: each gets a fixed KV cache
# (kv_cache_memory_bytes, KV env, default 4 GB: ~140k tokens of the 1.5B target) so that
# vLLM skips its memory profiling, whose check fails when another process on the GPU
# frees memory meanwhile; MEM (gpu_memory_utilization) only has to pass the start check.
# Each trace: vLLM's defaults otherwise (runner, async), the study's sampling (greedy,
# logprobs 10, the prompts' own max_tokens of 128).
set -uo pipefail
. "$(dirname "$0")/env.sh"
LIMIT=${TLIM:-540}
MEM=${MEM:-0.12}
pids=()
for spec in "$@"; do
  name=${spec%%:*}; args=${spec#*:}
  ( T0=$SECONDS
    timeout $LIMIT $TL trace --prompts "$PROMPTS" --out /tmp/runs/$name --quiet \
      --engine-option gpu_memory_utilization=$MEM \
      --engine-option kv_cache_memory_bytes=${KV:-4000000000} $args > /tmp/runs/$name.log 2>&1
    echo "rc=$? trace $name took $((SECONDS-T0)) s" | tee -a /tmp/runs/$name.log ) &
  pids+=($!)
done
wait "${pids[@]}"
for spec in "$@"; do
  name=${spec%%:*}
  tail -3 /tmp/runs/$name.log
  cp /tmp/runs/$name.log /tmp/runs/$name/trace.log 2>/dev/null
  rm -rf /tmp/runs/$name/capture/*.tmp 2>/dev/null
  tar -czf $OUT/$name.tgz -C /tmp/runs $name
done
ls -la $OUT
