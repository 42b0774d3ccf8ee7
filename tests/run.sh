#!/usr/bin/env bash
# Runs every test suite. Installs what the tests use (the TypeScript compiler and mypy, pinned
# in tests/toolchain/), builds the workspace (the guest is built for wasm32-wasip1 by
# host/build.rs; the toolchain and target come from rust-toolchain.toml), then tests it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f tests/toolchain/package-lock.json ]; then
  npm ci --prefix tests/toolchain --no-audit --no-fund --loglevel=error
fi
if [ -f tests/toolchain/requirements.txt ]; then
  python3 -m pip install --quiet --disable-pip-version-check -r tests/toolchain/requirements.txt
fi
cargo build --workspace --all-targets --locked
cargo test --workspace --locked
