#!/usr/bin/env node
// An editor built on the official TypeScript SDK (@agentclientprotocol/sdk)
// that shows plans and answers questions, used by tests/test_ts_sdk_editor.py.
//
// Usage:
//   node editor_client.mjs --frames FILE --cwd DIR [--timeout-ms MS] -- AGENT_COMMAND [ARGS...]
//
// It advertises form elicitation and notices (no files, no terminal), answers
// every elicitation/create by accepting the first choice the form offers, and
// runs one prompt.  stdout gets a JSON summary: the requests the agent made,
// every session/update the SDK delivered (an update the SDK could not parse
// never gets here), the prompt's response.  Every raw line of both directions
// goes to FILE as {"dir", "line"} JSON lines.

import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

function parseArgs(argv) {
  const options = { frames: null, cwd: process.cwd(), timeoutMs: 30000, command: null };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") {
      options.command = argv.slice(i + 1);
      break;
    } else if (arg === "--frames") options.frames = argv[++i];
    else if (arg === "--cwd") options.cwd = argv[++i];
    else if (arg === "--timeout-ms") options.timeoutMs = Number.parseInt(argv[++i], 10);
    else throw new Error(`unknown argument ${JSON.stringify(arg)}`);
  }
  if (!options.command?.length) throw new Error("no agent command after --");
  return options;
}

const frames = [];
function tap(dir) {
  const decoder = new TextDecoder();
  let pending = "";
  return new TransformStream({
    transform(chunk, controller) {
      pending += decoder.decode(chunk, { stream: true });
      let nl;
      while ((nl = pending.indexOf("\n")) !== -1) {
        frames.push({ dir, line: pending.slice(0, nl) });
        pending = pending.slice(nl + 1);
      }
      controller.enqueue(chunk);
    },
  });
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const summary = { requests: [], updates: [] };

  const child = spawn(options.command[0], options.command.slice(1), {
    stdio: ["pipe", "pipe", "inherit"],
    env: process.env,
  });
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  child.stdin.on("error", () => {});
  const toAgent = tap("send");
  toAgent.readable.pipeTo(Writable.toWeb(child.stdin)).catch(() => {});
  const fromAgent = Readable.toWeb(child.stdout).pipeThrough(tap("recv"));
  const stream = acp.ndJsonStream(toAgent.writable, fromAgent);
  const m = acp.methods.client;

  const app = acp
    .client({ name: "acp-bridge-ts-editor" })
    .onNotification(m.session.update, ({ params }) => summary.updates.push(params.update))
    .onRequest(m.elicitation.create, ({ params }) => {
      summary.requests.push({ method: m.elicitation.create, params });
      const choice = params.requestedSchema?.properties?.choice?.oneOf?.[0]?.const;
      return { action: "accept", content: { choice } };
    })
    .onRequest("*", ({ method, params }) => {
      summary.requests.push({ method, params });
      throw acp.RequestError.methodNotFound(method);
    });

  const session = async (ctx) => {
    const t = options.timeoutMs;
    await withTimeout(
      ctx.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: {
          fs: { readTextFile: false, writeTextFile: false },
          terminal: false,
          elicitation: { form: {} },
          session: { notices: {} },
        },
        clientInfo: { name: "acp-bridge-ts-editor", version: "0.0.0" },
      }),
      t,
      "initialize",
    );
    const created = await withTimeout(
      ctx.request(acp.methods.agent.session.new, { cwd: options.cwd, mcpServers: [] }),
      t,
      "session/new",
    );
    summary.response = await withTimeout(
      ctx.request(acp.methods.agent.session.prompt, {
        sessionId: created.sessionId,
        prompt: [{ type: "text", text: "Plan the storage, and ask me which database." }],
      }),
      t,
      "the prompt",
    );
  };

  try {
    await withTimeout(app.connectWith(stream, session), options.timeoutMs * 2, "the session");
  } catch (error) {
    summary.error = String(error?.stack ?? error);
  }
  child.stdin.end();
  summary.exit = await withTimeout(exited, 10000, "agent exit").catch(() => null);
  if (options.frames) writeFileSync(options.frames, frames.map((f) => JSON.stringify(f) + "\n").join(""));
  process.stdout.write(JSON.stringify(summary, null, 2) + "\n");
  return summary.error === undefined ? 0 : 2;
}

main().then(
  (status) => (process.exitCode = status),
  (error) => {
    process.stdout.write(JSON.stringify({ error: String(error?.stack ?? error) }) + "\n");
    process.exitCode = 2;
  },
);
