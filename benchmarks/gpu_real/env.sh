# sourced by every GPU step: the checkout first on PYTHONPATH, the bundle's packages after
export TL_ROOT=${TL_ROOT:-$(pwd)}
export PYTHONPATH=$TL_ROOT:/tmp/site TOKENLENS_CACHE=/tmp/tlcache PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TL="python3 -m tokenlens"
export PROMPTS=$TL_ROOT/reports/full/prompts.jsonl
export TARGET=/tmp/tlcache/models/qwen2.5-coder-1.5b-instruct
export DRAFTER=/tmp/tlcache/models/qwen2.5-coder-0.5b-instruct
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/runs
# wait_for FILE... : until each exists (the background model builds write them), 200 s at most
wait_for() {
  local f i
  for f in "$@"; do
    for i in $(seq 200); do [ -e "$f" ] && break; sleep 1; done
    [ -e "$f" ] || { echo "wait_for: $f never appeared"; return 1; }
  done
}
# elapsed since T_START (set by the caller)
el() { echo $(( $(date +%s) - ${T_START:-$(date +%s)} )); }
