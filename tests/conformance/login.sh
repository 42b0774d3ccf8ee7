#!/usr/bin/env bash
# `codemode auth` as a person uses it, against a conformance scenario's server (started by the
# suite, whose URL is the argument): log in once (the browser played by browser.sh), list what
# is kept, run a program with no person to ask (the kept token is used), log out, and run again
# (refused, naming the command). With $CODEMODE_LOGIN_SCOPE, a second login asks for that
# scope and the program runs again; with $CODEMODE_LOGIN_STATE, every command is given it as
# `--state` (a shared store). A second login without the configuration finds the server's
# address with the authorization kept. What each step printed is written to
# $CODEMODE_LOGIN_REPORT for the test (tests/e2e/conformance.rs) to read, with the kept file's
# bytes in hex.
set -uo pipefail
url="$1"
here="$(cd "$(dirname "$0")" && pwd)"
codemode="${CODEMODE_BIN:?}"
report="${CODEMODE_LOGIN_REPORT:?}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CODEMODE_STATE_DIR="$work/state"
state=()
if [ -n "${CODEMODE_LOGIN_STATE:-}" ]; then
  state=(--state "$CODEMODE_LOGIN_STATE")
fi
printf '{"mcpServers": {"s": {"url": "%s"}}}' "$url" > "$work/config.json"
cat > "$work/program.ts" <<'TS'
const results: unknown[] = [];
for (const name of Object.keys(tools).filter((name) => name.startsWith("mcp__s__"))) {
  try {
    results.push([name, await (tools as any)[name]({})]);
  } catch (error) {
    results.push([name, String(error)]);
  }
}
return results;
TS
{
  echo "== login"
  BROWSER="$here/browser.sh" "$codemode" auth login s --config "$work/config.json" "${state[@]}" 2>&1
  echo "exit $?"
  echo "== list"
  "$codemode" auth list "${state[@]}" 2>&1
  echo "== kept"
  od -An -tx1 "$work/state/credentials/s" 2>/dev/null | tr -d ' \n'
  echo
  echo "== run"
  env -u BROWSER RUST_LOG=trace "$codemode" run --config "$work/config.json" "${state[@]}" "$work/program.ts" </dev/null 2>&1
  echo "exit $?"
  echo "== login again"
  BROWSER="$here/browser.sh" "$codemode" auth login s "${state[@]}" 2>&1
  echo "exit $?"
  if [ -n "${CODEMODE_LOGIN_SCOPE:-}" ]; then
    echo "== login wider"
    BROWSER="$here/browser.sh" "$codemode" auth login s --config "$work/config.json" --scope "$CODEMODE_LOGIN_SCOPE" "${state[@]}" 2>&1
    echo "exit $?"
    echo "== run wider"
    env -u BROWSER "$codemode" run --config "$work/config.json" "${state[@]}" "$work/program.ts" </dev/null 2>&1
    echo "exit $?"
  fi
  echo "== logout"
  "$codemode" auth logout s "${state[@]}" 2>&1
  echo "exit $?"
  echo "== run after logout"
  env -u BROWSER "$codemode" run --config "$work/config.json" "${state[@]}" "$work/program.ts" </dev/null 2>&1
  echo "exit $?"
} > "$report"
