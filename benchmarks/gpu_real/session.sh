# session.sh: one GPU session's whole device work, started detached by the first call
# (setsid) while the weight parts still arrive; every step waits for what it needs.
# Parts arrive in /tmp/p (part1-4: the bundle; t00-t17: the target GGUF; d00-d07: the
# drafter), each renamed into place whole. Steps, one after another on the GPU:
#   1. the positive control (issue 32): generate (or CONTROL_FROM: a committed run's
#      generations), then fine-tune + check + traces per CONTROL_CONFIGS attempt until
#      one passes the check (analyses run on the CPU afterwards);
#   2. the speed bench, resumed from reports/gpu/real/bench, with --compare-plain;
#   3. the capture overhead with its A/A control, and the step profile.
# Results: /tmp/pcout2-N (control attempt N), /tmp/sessout (bench, overhead); log /tmp/sess.log.
# SKIP_CONTROL=1 / SKIP_BENCH=1 / SKIP_OVERHEAD=1 leave a step out.
set -uo pipefail
cd "$(dirname "$0")/../.."
. benchmarks/gpu_real/env.sh
L=/tmp/sess.log
say() { echo "[$(date -u +%T) +$(el)s] $*" >> $L; }
T_START=$(date +%s)
waitn() { while [ "$(ls $1 2>/dev/null | wc -l)" -lt "$2" ]; do sleep 1; done; }
mkdir -p /tmp/p /tmp/sessout
say "session start; commit ${COMMIT:-?}"
waitn "/tmp/p/part?" 4; say "bundle parts in"
bash benchmarks/gpu_real/install.sh /tmp/p bundle; say "bundle: $(tail -1 /tmp/install.log)"
( waitn "/tmp/p/d??" 8; say "drafter parts in"
  bash benchmarks/gpu_real/install.sh /tmp/p drafter; say "drafter: $(tail -1 /tmp/ens_d.log)" ) &
waitn "/tmp/p/t??" 18; say "target parts in"
bash benchmarks/gpu_real/install.sh /tmp/p target; say "target: $(tail -1 /tmp/ens_t.log)"
export TOKENLENS_CACHE=/tmp/tlcache
if [ "${SKIP_CONTROL:-0}" != 1 ]; then
  GEN=${CONTROL_FROM:-}
  if [ -z "$GEN" ]; then
    OUT=/tmp/pcout1 bash benchmarks/positive_control_gpu.sh /tmp/pc generate ${GEN_S:-600} > /tmp/pc1.log 2>&1
    say "control generate rc=$?"; GEN=/tmp/pcout1
  fi
  wait_for /tmp/ens_d.done
  # CONTROL_CONFIGS: PC_OPTIONS of each attempt, ';'-separated, tried in order until one
  # passes the manipulation check (exit status 3 = failed check: the next is tried)
  IFS=';' read -ra CFGS <<< "${CONTROL_CONFIGS:- }"
  i=0
  for cfg in "${CFGS[@]}"; do
    i=$((i + 1))
    FROM=$GEN OUT=/tmp/pcout2-$i ANALYZE=0 TRACE_RESERVE_S=${TRACE_S:-330} PC_OPTIONS="$cfg" \
      bash benchmarks/positive_control_gpu.sh /tmp/pc-$i train ${TRAIN_S:-720} > /tmp/pc2-$i.log 2>&1
    rc=$?; cp /tmp/pc2-$i.log /tmp/pcout2-$i/ 2>/dev/null
    say "control attempt $i (${cfg}) train+check+trace rc=$rc"
    [ "$rc" = 3 ] || break
  done
fi
wait_for /tmp/ens_d.done
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  [ -d /tmp/bench ] || cp -r reports/gpu/real/bench /tmp/bench
  timeout ${BENCH_S:-480} $TL bench --plan plans/gpu-real-h200.toml --out /tmp/bench --quiet \
    --compare-plain '*/draft-k3/full/all/*' > /tmp/bench.log 2>&1
  say "bench rc=$?"
  cp /tmp/bench.log /tmp/bench/ 2>/dev/null; tar -czf /tmp/sessout/bench.tgz -C /tmp bench
fi
if [ "${SKIP_OVERHEAD:-0}" != 1 ]; then
  OUT=/tmp/sessout B256=${B256:-60} B1=${B1:-45} bash benchmarks/gpu_real/overhead.sh > /tmp/overhead.log 2>&1
  say "overhead rc=$?"; cp /tmp/overhead.log /tmp/sessout/
fi
say "session done"
