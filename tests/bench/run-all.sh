#!/usr/bin/env bash
# The one command behind BENCHMARKS.md: builds codemode and the peers, measures each on this
# machine, and writes the report at the repository root.
#
# Usage: tests/bench/run-all.sh
#   CARGO_TARGET_DIR          where cargo builds (default: ./target); the JSON goes to its bench/
#   NATIVE_BOA_TARGET_DIR     target dir of tests/bench/native-boa (default: $CARGO_TARGET_DIR/bench-native-boa)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
native_target="${NATIVE_BOA_TARGET_DIR:-$target/bench-native-boa}"
out="$target/bench"
mkdir -p "$out"

step() { printf '\n== %s\n' "$*" >&2; }

# Everything is built before anything is measured, so no compiler competes with a measurement.
# Builds are niced: the machine stays usable while they run.
step "build codemode"
nice -n 19 cargo build --release --locked -p codemode-cli --features bench
codemode="$target/release/codemode"

step "build native Boa peer"
nice -n 19 cargo build --release --locked --manifest-path tests/bench/native-boa/Cargo.toml \
  --target-dir "$native_target"

step "install Node peers' dependencies"
(cd tests/bench && npm ci --no-audit --no-fund)

step "install pydantic-monty (PyPI) in a virtual environment"
python3 -m venv "$out/monty-venv"
"$out/monty-venv/bin/pip" install --quiet --disable-pip-version-check -r tests/bench/requirements.txt

step "measure codemode"
# RSS per instance counts the module file's pages each instance maps, which depends on how the
# file sits in the page cache (just written, or read back); start from a dropped cache where the
# machine allows it, so that builds compare alike.
sync
echo 1 2>/dev/null >/proc/sys/vm/drop_caches || echo "page cache not dropped (needs root)" >&2
# Older builds lack the interruption study; their report simply leaves that section out.
if "$codemode" bench --help | grep -q -- '--interruption'; then
  "$codemode" bench --json --interruption >"$out/codemode.json"
else
  echo "codemode bench has no --interruption; measuring without the study" >&2
  "$codemode" bench --json >"$out/codemode.json"
fi

step "measure codemode's Python guest"
"$codemode" bench --json --lang python >"$out/codemode-python.json"

step "measure Node worker_threads peer"
node tests/bench/node-worker-peer.mjs >"$out/node-worker.json"

step "measure quickjs-emscripten peer"
node tests/bench/quickjs-wasm-peer.mjs >"$out/quickjs-wasm.json"

step "measure native Boa peer"
"$native_target/release/codemode-bench-native-boa" >"$out/native-boa.json"

step "measure pydantic-monty peer"
"$out/monty-venv/bin/python" tests/bench/monty-peer.py >"$out/monty.json"

step "write BENCHMARKS.md"
node tests/bench/report.mjs "$out/codemode.json" "$out/codemode-python.json" "$out/node-worker.json" "$out/quickjs-wasm.json" \
  "$out/native-boa.json" "$out/monty.json"
