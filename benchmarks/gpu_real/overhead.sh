# overhead.sh: capture overhead on the real target with the A/A control (n-gram k=3, V1
# runner, synchronous scheduling: the scheduler hook on the critical path), one request
# at a time and 256 at a time; then the plain-vLLM step profile of the draft model k=3.
set -uo pipefail
. "$(dirname "$0")/env.sh"
T0=$SECONDS
python3 $TL_ROOT/benchmarks/gpu_overhead.py $OUT/overhead-real-b256.json --model $TARGET \
  --prompts-file "$PROMPTS" --prompts 256 --batch 0 --max-tokens 128 --pairs 6 --aa --budget-s ${B256:-75} 2>&1 | grep -v "^INFO\|^WARNING\|^(EngineCore" | tail -20
echo "b256 done at $((SECONDS-T0)) s"
python3 $TL_ROOT/benchmarks/gpu_overhead.py $OUT/overhead-real-b1.json --model $TARGET \
  --prompts-file "$PROMPTS" --prompts 6 --batch 1 --max-tokens 128 --pairs 6 --aa --budget-s ${B1:-75} 2>&1 | grep -v "^INFO\|^WARNING\|^(EngineCore" | tail -20
echo "b1 done at $((SECONDS-T0)) s"
if [ "${PROFILE:-1}" = 1 ]; then
  VLLM_PLUGINS="" python3 $TL_ROOT/benchmarks/gpu_step_profile.py $OUT/step-profile-dm3.json \
    --model $TARGET --draft-model $DRAFTER --method draft_model --k 3 --prompts-file "$PROMPTS" \
    --prompts 4 > /tmp/profile.log 2>&1
  grep -v "^INFO\|^WARNING\|^(EngineCore\|^DEBUG" /tmp/profile.log > $OUT/step-profile-dm3.log
  grep "^TIMING" $OUT/step-profile-dm3.log; tail -60 $OUT/step-profile-dm3.log
  echo "profile done at $((SECONDS-T0)) s"
fi
