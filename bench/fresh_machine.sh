#!/usr/bin/env bash
# A fresh machine, rehearsed: run `.ci/run` (the README's test command) in a fresh clone, as a
# newly provisioned machine would, RUNS times in a row, each in its own new clone and new, empty
# HOME: no matplotlib or fontconfig caches, no bytecode, no .venv, no pytest cache. Only uv's
# package cache and uv's own Pythons are shared (so torch is not downloaded again); the Debian
# packages are installed by `.ci/run` itself where they are missing.
#
#   bench/fresh_machine.sh [--runs N] [--hog] [REV]
#
# --hog: a CPU hog on one core for the whole run (`stress-ng --cpu 1`, Debian's stress-ng), to
# show that no test depends on having both cores. REV: the commit to clone (default HEAD).
# Prints one line per run: pass/fail, pytest's summary line, wall time; the logs stay in the
# printed folder. Exit status: 0 when every run passed.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
runs=1 hog=0 rev=HEAD
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --hog) hog=1; shift ;;
    -h|--help) sed -n 2,14p "$0"; exit 0 ;;
    *) rev="$1"; shift ;;
  esac
done
commit="$(git -C "$repo" rev-parse --verify "$rev^{commit}")" || { echo "fresh_machine: no commit $rev" >&2; exit 2; }
uv_bin="$(command -v uv)" || { echo "fresh_machine: uv is not on PATH (python3 -m pip install uv)" >&2; exit 2; }
uv_cache="$(uv cache dir)" uv_pythons="$(uv python dir)"
if [ "$hog" = 1 ] && ! command -v stress-ng >/dev/null; then
  echo "fresh_machine: --hog needs stress-ng (apt-get install stress-ng)" >&2; exit 2
fi
root="$(mktemp -d /tmp/fresh-machine-XXXXXX)"
echo "fresh machine: $runs run(s) of .ci/run at ${commit:0:7}$([ $hog = 1 ] && echo ', one core hogged (stress-ng --cpu 1)'), logs in $root"
failed=0
for i in $(seq 1 "$runs"); do
  dir="$root/run$i"
  mkdir -p "$dir/home"
  git clone -q --no-local "$repo" "$dir/repo" && git -C "$dir/repo" checkout -q "$commit"
  hog_pid=""
  if [ "$hog" = 1 ]; then stress-ng --cpu 1 --quiet & hog_pid=$!; fi
  start=$(date +%s)
  # A new machine's environment: this machine's settings (certificates, proxies, registries) but
  # an empty HOME, no cache or virtualenv variable of this shell, and uv on PATH.
  env -u VIRTUAL_ENV -u UV_PROJECT_ENVIRONMENT -u XDG_CACHE_HOME -u XDG_CONFIG_HOME -u XDG_DATA_HOME \
      -u MPLCONFIGDIR -u PYTHONPYCACHEPREFIX -u PYTHONDONTWRITEBYTECODE -u MUJOCO_GL -u HF_HOME \
      -u HF_LEROBOT_HOME ${PYTEST_ADDOPTS:+PYTEST_ADDOPTS="$PYTEST_ADDOPTS"} \
      HOME="$dir/home" PATH="$(dirname "$uv_bin"):$PATH" CI=true \
      UV_CACHE_DIR="$uv_cache" UV_PYTHON_INSTALL_DIR="$uv_pythons" \
      bash "$dir/repo/.ci/run" >"$dir/ci.log" 2>&1
  code=$?
  wall=$(( $(date +%s) - start ))
  [ -n "$hog_pid" ] && { kill "$hog_pid" 2>/dev/null; wait "$hog_pid" 2>/dev/null; }
  summary="$(grep -E '^(=+ )?[0-9]+ (passed|failed)|(passed|failed|error).* in [0-9.]+s' "$dir/ci.log" | tail -1)"
  status=pass; [ $code = 0 ] || { status=FAIL; failed=1; }
  printf 'run %d: %s (exit %d) %s; wall %dm%02ds\n' "$i" "$status" "$code" "$summary" $((wall / 60)) $((wall % 60))
  [ $code = 0 ] || grep -E '^(FAILED|ERROR) ' "$dir/ci.log" | head -20
done
exit $failed
