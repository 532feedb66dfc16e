// A client built on the MCP TypeScript SDK (the pinned @modelcontextprotocol/sdk) that makes one
// long tool call through the bridge with a per-request timeout reset by progress
// (Client.callTool(..., {timeout, resetTimeoutOnProgress: true, onprogress}): the SDK then sends a
// progressToken). Used by tests/interop/test_interop_long_call.py.
//
// argv: <call seconds> <timeout ms> <bridge command> [bridge args...]
// stdout: one JSON line, {"ok": true, "text": ..., "progress": N} or {"ok": false, "error": ...}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [seconds, timeoutMs, command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "long-call-client", version: "1" });
let progress = 0;
let outcome;
try {
  await client.connect(transport);
  const result = await client.callTool(
    { name: "slow", arguments: { seconds: Number(seconds) } },
    undefined,
    { timeout: Number(timeoutMs), resetTimeoutOnProgress: true, onprogress: () => { progress += 1; } },
  );
  outcome = { ok: true, text: result.content?.[0]?.text, progress };
} catch (error) {
  outcome = { ok: false, error: String(error?.message ?? error), code: error?.code, progress };
}
process.stdout.write(JSON.stringify(outcome) + "\n");
await client.close();
process.exit(0);
