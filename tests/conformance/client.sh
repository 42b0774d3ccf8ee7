#!/usr/bin/env bash
# codemode as the MCP conformance suite's client: the suite starts a server for a scenario and
# runs this with the server's URL. It writes a configuration naming that server (with the
# scenario's OAuth settings, secrets passed through the environment), then runs a program
# that calls each of the server's tools through `codemode run`. A person is played by
# $BROWSER (browser.sh) for the authorization-code flow, and at the terminal (terminal.py) for
# the server's questions, answering `y` and each field's default.
set -euo pipefail
url="$1"
here="$(cd "$(dirname "$0")" && pwd)"
codemode="${CODEMODE_BIN:?CODEMODE_BIN names the codemode binary}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CODEMODE_STATE_DIR="$work/state"
export BROWSER="$here/browser.sh"

python3 - "$url" "$work" <<'PY'
import json, os, sys
url, work = sys.argv[1], sys.argv[2]
context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
oauth = {}
secrets = {}
for key in ("client_id", "signing_algorithm", "idp_client_id", "idp_issuer", "idp_token_endpoint"):
    if key in context:
        oauth[key] = context[key]
# Secrets are named as environment variables, as a configuration would keep them.
for key in ("client_secret", "private_key_pem", "idp_id_token", "idp_client_secret"):
    if key in context:
        variable = "CONFORMANCE_" + key.upper()
        secrets[variable] = context[key]
        oauth[key] = "${" + variable + "}"
scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
if scenario.startswith("auth/client-credentials"):
    oauth["grant_type"] = "client_credentials"
elif "idp_id_token" in context:
    oauth["grant_type"] = "urn:ietf:params:oauth:grant-type:jwt-bearer"
elif "client_id" not in context:
    # Published where codemode's users publish it; used where the server accepts it.
    oauth["client_metadata_url"] = "https://conformance-test.local/client-metadata.json"
server = {"url": url, "oauth": oauth}
with open(os.path.join(work, "config.json"), "w") as f:
    json.dump({"mcpServers": {"s": server}}, f)
# The calls a scenario asks for, else each tool once with arguments the program picks.
with open(os.path.join(work, "calls.json"), "w") as f:
    json.dump(context.get("toolCalls") or context.get("tool_calls") or [], f)
with open(os.path.join(work, "secrets.env"), "w") as f:
    for name, value in secrets.items():
        f.write(f"{name}={json.dumps(value)}\n")
PY
while IFS='=' read -r name value; do
  export "$name"="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]), end="")' "$value")"
done < "$work/secrets.env"

{
  printf 'const asked: { name: string; arguments?: Record<string, unknown> }[] = %s;\n' "$(cat "$work/calls.json")"
  cat <<'TS'
const args: Record<string, unknown> = { add_numbers: { a: 2, b: 3 } };
const calls = asked.length > 0
  ? asked
  : Object.keys(tools)
      .filter((name) => name.startsWith("mcp__s__"))
      .map((name) => ({ name: name.slice("mcp__s__".length), arguments: undefined }));
// Arguments for a tool the scenario gives none for: what its schema requires, learned from
// the validation errors (a string first, then the type the error asks for).
const placeholder: Record<string, unknown> = { integer: 1, number: 1, boolean: true, array: [], object: {} };
async function call(name: string, given: Record<string, unknown> | undefined): Promise<unknown> {
  const chosen: Record<string, unknown> = { ...(given ?? args[name] ?? {}) };
  for (let attempt = 0; ; attempt++) {
    try {
      return await (tools as any)["mcp__s__" + name](chosen);
    } catch (error) {
      const text = String(error);
      // A scenario's own arguments are sent as it gives them.
      if (given !== undefined || attempt >= 8 || !text.includes("invalid arguments")) throw error;
      for (const missing of text.matchAll(/missing required property "([^"]+)"/g)) chosen[missing[1]] = "x";
      for (const wrong of text.matchAll(/\/([^/\s":;]+)[^;]*?expected (integer|number|boolean|array|object)/g)) {
        chosen[wrong[1]] = placeholder[wrong[2]];
      }
      for (const wrong of text.matchAll(/"([^"]+)" must be an? (integer|number|boolean|array|object)/g)) {
        chosen[wrong[1]] = placeholder[wrong[2]];
      }
    }
  }
}
const results: unknown[] = [];
for (const step of calls) {
  try {
    results.push([step.name, await call(step.name, step.arguments)]);
  } catch (error) {
    results.push([step.name, `error: ${error}`]);
  }
}
return results;
TS
} > "$work/program.ts"

# A person at the terminal answers the server's questions: accept, and each field's default.
python3 "$here/terminal.py" "$codemode" run --config "$work/config.json" "$work/program.ts"
