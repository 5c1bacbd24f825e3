# bench.sh: the speed matrix on a quiet GPU (nothing else running), then the plain-vLLM
# comparison; the bench directory (no weights) as $OUT/bench.tgz.
set -uo pipefail
. "$(dirname "$0")/env.sh"
T0=$SECONDS
cp "$PROMPTS" /tmp/prompts.jsonl
timeout ${BLIM:-540} $TL bench --plan $TL_ROOT/plans/gpu-real-h200.toml --out /tmp/bench --quiet ${BENCH_ARGS:-} 2>&1 | tail -40 | tee /tmp/bench.log
echo "rc=$? bench took $((SECONDS-T0)) s" | tee -a /tmp/bench.log
cp /tmp/bench.log /tmp/bench/ 2>/dev/null
tar -czf $OUT/bench.tgz -C /tmp bench
