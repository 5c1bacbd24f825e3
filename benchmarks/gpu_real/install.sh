# install.sh PARTS: the bundle (part1..4 in PARTS) and the two GGUFs (t??, d?? in PARTS).
# Run in three stages as the parts arrive: `bundle`, `target`, `drafter`; the model
# builds run detached (setsid) and write /tmp/ens_{t,d}.done when they end.
set -uo pipefail
. "$(dirname "$0")/env.sh"
P=$1; stage=$2
case $stage in
  bundle)
    cat "$P"/part? | tar -xO ./install_bundle.sh > /tmp/install_bundle.sh
    bash /tmp/install_bundle.sh "$P" > /tmp/install.log 2>&1; echo "install rc=$?" >> /tmp/install.log
    rm -f "$P"/part?
    touch /tmp/bundle.done;;
  target|drafter)
    wait_for /tmp/bundle.done || exit 1
    mkdir -p /tmp/tlcache/gguf
    if [ $stage = target ]; then f=qwen2.5-coder-1.5b-instruct; g=t; m=target; else f=qwen2.5-coder-0.5b-instruct; g=d; m=drafter; fi
    cat "$P"/$g?? > /tmp/tlcache/gguf/$f.Q4_K_M.gguf && rm -f "$P"/$g??
    sha256sum /tmp/tlcache/gguf/$f.Q4_K_M.gguf > /tmp/ens_$g.sha
    ( time $TL models ensure $m --quiet ) > /tmp/ens_$g.log 2>&1; echo "rc=$?" >> /tmp/ens_$g.log
    touch /tmp/ens_$g.done;;
esac
