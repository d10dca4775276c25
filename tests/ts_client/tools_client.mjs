#!/usr/bin/env node
// An editor built on the official TypeScript SDK (@agentclientprotocol/sdk)
// that serves files and terminals, used by tests/test_ts_sdk_tools.py.
//
// Usage:
//   node tools_client.mjs --frames FILE --cwd DIR [--timeout-ms MS] -- AGENT_COMMAND [ARGS...]
//
// It advertises fs.readTextFile, fs.writeTextFile and terminal, implements
// their handlers on the local disk and with child processes, allows every
// permission request once, and runs one prompt.  stdout gets a JSON summary:
// the requests the agent made (method and params), every session/update the
// SDK delivered, the prompt's response, and the last agent text.  Every raw
// line of both directions goes to FILE as {"dir", "line"} JSON lines.

import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
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

// -- the editor's terminals -------------------------------------------------------

const terminals = new Map();

function createTerminal(params) {
  const env = { ...process.env };
  for (const v of params.env ?? []) env[v.name] = v.value;
  const child = spawn(params.command, params.args ?? [], {
    cwd: params.cwd ?? undefined,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const terminal = { child, output: "", exitStatus: null };
  terminal.exited = new Promise((resolve) => {
    child.on("close", (code, signal) => {
      terminal.exitStatus = { exitCode: code, signal };
      resolve(terminal.exitStatus);
    });
  });
  child.stdout.on("data", (d) => (terminal.output += d.toString()));
  child.stderr.on("data", (d) => (terminal.output += d.toString()));
  const id = `term_${terminals.size + 1}`;
  terminals.set(id, terminal);
  return id;
}

function terminal(params) {
  const t = terminals.get(params.terminalId);
  if (!t) throw acp.RequestError.invalidParams(`no terminal ${params.terminalId}`);
  return t;
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
  const seen = (method, params) => summary.requests.push({ method, params });
  const m = acp.methods.client;

  const app = acp
    .client({ name: "acp-bridge-ts-tools" })
    .onNotification(m.session.update, ({ params }) => summary.updates.push(params.update))
    .onRequest(m.session.requestPermission, ({ params }) => {
      seen(m.session.requestPermission, params);
      const allow = params.options.find((o) => o.kind === "allow_once");
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    })
    .onRequest(m.fs.readTextFile, ({ params }) => {
      seen(m.fs.readTextFile, params);
      return { content: readFileSync(params.path, "utf8") };
    })
    .onRequest(m.fs.writeTextFile, ({ params }) => {
      seen(m.fs.writeTextFile, params);
      mkdirSync(dirname(params.path), { recursive: true });
      writeFileSync(params.path, params.content);
      return {};
    })
    .onRequest(m.terminal.create, ({ params }) => {
      seen(m.terminal.create, params);
      return { terminalId: createTerminal(params) };
    })
    .onRequest(m.terminal.waitForExit, async ({ params }) => {
      seen(m.terminal.waitForExit, params);
      return await terminal(params).exited;
    })
    .onRequest(m.terminal.output, ({ params }) => {
      seen(m.terminal.output, params);
      const t = terminal(params);
      return { output: t.output, truncated: false, exitStatus: t.exitStatus };
    })
    .onRequest(m.terminal.kill, ({ params }) => {
      seen(m.terminal.kill, params);
      terminal(params).child.kill("SIGKILL");
      return {};
    })
    .onRequest(m.terminal.release, ({ params }) => {
      seen(m.terminal.release, params);
      const t = terminal(params);
      if (t.exitStatus === null) t.child.kill("SIGKILL");
      terminals.delete(params.terminalId);
      return {};
    });

  const session = async (ctx) => {
    const t = options.timeoutMs;
    await withTimeout(
      ctx.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true },
        clientInfo: { name: "acp-bridge-ts-tools", version: "0.0.0" },
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
        prompt: [{ type: "text", text: "Read my notes, change milk to bread, then show them." }],
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
  summary.text = summary.updates
    .filter((u) => u.sessionUpdate === "agent_message_chunk" && u.content.type === "text")
    .map((u) => u.content.text)
    .join("");
  summary.openTerminals = terminals.size;
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
