// A second MCP client of `doraforge serve`: the official TypeScript SDK over Streamable HTTP.
//
//   node client.mjs <url> [plan-json]        (the plan is read from stdin when not given)
//
// The plan is a JSON array of steps: {"op": "listTools"} or
// {"op": "callTool", "name": "...", "arguments": {...}, "timeoutMs": 120000}. The client
// connects once (with `Authorization: Bearer $MCP_BEARER_TOKEN` when that is set), lists the
// tools (so every structuredContent is checked against its outputSchema, as the Python SDK
// does), prints one JSON line for the connection and one per step, in order, then closes.
// A step that fails (a JSON-RPC error, a result the SDK refuses against the tool's
// outputSchema) is printed as {"ok": false, "error": ...} and the plan goes on: the test
// decides what that means. Image and audio data are replaced by their length, first bytes
// and SHA-256, so a frame never floods the test's pipe. Exit 0 when every step was
// printed, 2 when the connection failed, 64 for a bad command line or plan.

import { createHash } from "node:crypto";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const DEFAULT_STEP_TIMEOUT_MS = 120_000;
const HEAD_BYTES = 8;

function emit(record) {
  process.stdout.write(`${JSON.stringify(record)}\n`);
}

function fail(code, message, exitCode) {
  emit({ op: "fatal", ok: false, error: { code, message } });
  process.exit(exitCode);
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

async function loadPlan(argument) {
  const text = argument ?? (await readStdin());
  let plan;
  try {
    plan = JSON.parse(text);
  } catch (error) {
    fail("MCP_TS_BAD_PLAN", `the plan is not JSON (${error.message}); pass a JSON array of steps`, 64);
  }
  if (!Array.isArray(plan)) fail("MCP_TS_BAD_PLAN", "the plan must be a JSON array of steps", 64);
  return plan;
}

// Binary payloads are summarised: their length, first bytes (hex) and SHA-256 are what a
// test checks.
function summariseData(data) {
  const bytes = Buffer.from(data ?? "", "base64");
  return {
    dataLength: (data ?? "").length,
    byteLength: bytes.length,
    headHex: bytes.subarray(0, HEAD_BYTES).toString("hex"),
    sha256: createHash("sha256").update(bytes).digest("hex"),
  };
}

function block(content) {
  if (content.type === "image" || content.type === "audio") {
    const { data, ...rest } = content;
    return { ...rest, ...summariseData(data) };
  }
  if (content.type === "resource" && typeof content.resource?.blob === "string") {
    const { blob, ...resource } = content.resource;
    return { ...content, resource: { ...resource, ...summariseData(blob) } };
  }
  return content;
}

function errorRecord(error) {
  return { name: error?.name ?? "Error", code: error?.code ?? null, message: String(error?.message ?? error) };
}

async function listTools(client, step) {
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {}, { timeout: step.timeoutMs ?? DEFAULT_STEP_TIMEOUT_MS });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return { tools };
}

async function callTool(client, step) {
  const result = await client.callTool(
    { name: step.name, arguments: step.arguments ?? {} },
    undefined,
    { timeout: step.timeoutMs ?? DEFAULT_STEP_TIMEOUT_MS },
  );
  return {
    isError: result.isError ?? false,
    content: (result.content ?? []).map(block),
    structuredContent: result.structuredContent ?? null,
  };
}

const OPERATIONS = { listTools, callTool };

async function runStep(client, step, index) {
  const operation = OPERATIONS[step?.op];
  if (operation === undefined) {
    return { step: index, op: step?.op ?? null, ok: false, error: { name: "PlanError", code: "MCP_TS_BAD_STEP", message: "op must be listTools or callTool" } };
  }
  try {
    return { step: index, op: step.op, name: step.name ?? null, ok: true, result: await operation(client, step) };
  } catch (error) {
    return { step: index, op: step.op, name: step.name ?? null, ok: false, error: errorRecord(error) };
  }
}

async function main() {
  const [url, planArgument] = process.argv.slice(2);
  if (!url) fail("MCP_TS_USAGE", "usage: node client.mjs <url> [plan-json]", 64);
  const plan = await loadPlan(planArgument);
  const token = process.env.MCP_BEARER_TOKEN;
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: "doraforge-ts-peer", version: "0.0.0" });
  try {
    await client.connect(transport);
  } catch (error) {
    fail("MCP_TS_CONNECT_FAILED", `could not connect to ${url}: ${errorRecord(error).message}`, 2);
  }
  // As the Python SDK does before its first call: the listed outputSchemas are what every
  // later structuredContent is validated against, so a result off its schema fails here too.
  let toolCount;
  try {
    toolCount = (await listTools(client, {})).tools.length;
  } catch (error) {
    fail("MCP_TS_LIST_FAILED", `tools/list failed: ${errorRecord(error).message}`, 2);
  }
  emit({
    op: "connect",
    ok: true,
    toolCount,
    protocolVersion: transport.protocolVersion ?? null,
    serverVersion: client.getServerVersion() ?? null,
    capabilities: client.getServerCapabilities() ?? null,
  });
  for (const [index, step] of plan.entries()) emit(await runStep(client, step, index));
  await client.close();
}

await main();
