#!/usr/bin/env bash
# Install Mailmesh's pinned Python dependencies into the environment of PYTHON — the one install step shared
# by `make venv` (.venv, every extra) and the images (deploy/docker/Dockerfile: no extra; k8s/spark/Dockerfile:
# the spark extra), so CI proves on every run the exact command the images run.
#
#   tools/install_deps.sh PYTHON [EXTRA...]
#
# What is installed: pyproject.toml's dependencies plus those of each EXTRA (dev, spark), every version taken
# from requirements.lock (`make lock` resolves it from pyproject.toml with every extra, so the lock pins the
# whole closure of any subset). uv does the install (fast, and it refuses a lock that cannot be satisfied);
# it is itself pinned and installed into PYTHON's environment with pip first.
set -euo pipefail

UV_VERSION="${UV_VERSION:-0.13.8}"
if [[ $# -lt 1 ]]; then
  echo "usage: $0 PYTHON [EXTRA...]" >&2
  exit 2
fi
python="$1"
shift
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

extras=()
for extra in "$@"; do
  extras+=(--extra "$extra")
done

"$python" -m pip install -q --disable-pip-version-check --no-cache-dir "uv==${UV_VERSION}"
"$python" -m uv pip install -q --python "$python" \
  -r "$root/pyproject.toml" -c "$root/requirements.lock" "${extras[@]}"
# pyspark is published as a source distribution only: every install that builds it leaves its ~600 MB
# unpacked source tree in uv's cache, and a machine running many worktrees filled its disk that way (87
# copies, 53 GB). `uv cache prune` removes what no install uses any more; the built wheel stays.
"$python" -m uv cache prune -q || echo "install_deps: uv cache prune failed (ignored)" >&2
