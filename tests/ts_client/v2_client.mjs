#!/usr/bin/env node
// An ACP v2 client built on the official TypeScript SDK's v2 client
// (@agentclientprotocol/sdk/experimental/v2), used by tests/test_ts_sdk_v2_client.py.
//
// Usage:
//   node v2_client.mjs --frames FILE --cwd DIR [--cancel-after K]
//                      [--resume SESSION_ID] -- AGENT_COMMAND [ARGS...]
//
// Without --resume: initialize (v2), session/new, a prompt cancelled after K
// agent_message_chunk updates (the Stop is confirmed by an idle state with
// stopReason "cancelled"), a follow-up prompt, then a prompt whose model runs
// a command after a permission request (answered allow_once).
// With --resume: initialize, then session/resume with replayFrom start.
//
// Every raw line both ways is written to FILE as JSON lines {"dir", "line"};
// stdout gets one JSON summary.  Exit 0 when the session ran, 2 when it could not.

import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/experimental/v2";

function parseArgs(argv) {
  const options = { frames: null, cwd: process.cwd(), cancelAfter: 3, resume: null, command: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") {
      options.command = argv.slice(i + 1);
      break;
    } else if (arg === "--frames") options.frames = argv[++i];
    else if (arg === "--cwd") options.cwd = argv[++i];
    else if (arg === "--cancel-after") options.cancelAfter = Number.parseInt(argv[++i], 10);
    else if (arg === "--resume") options.resume = argv[++i];
    else throw new Error(`unknown argument ${JSON.stringify(arg)}`);
  }
  return options;
}

const frames = [];

// A byte stream that passes everything through and records each line.
function tap(dir) {
  const decoder = new TextDecoder();
  let pending = "";
  return new TransformStream({
    transform(chunk, controller) {
      pending += decoder.decode(chunk, { stream: true });
      let newline;
      while ((newline = pending.indexOf("\n")) !== -1) {
        frames.push({ dir, line: pending.slice(0, newline) });
        pending = pending.slice(newline + 1);
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

// Every update until the session's idle state; the idle's stop reason.
async function untilIdle(session) {
  const updates = [];
  for (;;) {
    const message = await withTimeout(session.nextUpdate(), 30000, "the next update");
    if (message.kind === "stop") return { updates, stopReason: message.stopReason };
    updates.push(message.update);
  }
}

const chunkText = (updates) =>
  updates
    .filter((u) => u.sessionUpdate === "agent_message_chunk" && u.content.type === "text")
    .map((u) => u.content.text)
    .join("");

async function firstProcess(ctx, options, summary) {
  const session = await ctx.buildSession(options.cwd).start();
  summary.sessionId = session.sessionId;

  // A prompt stopped after K chunks.
  const first = await session.prompt("first");
  summary.firstMessageId = first.messageId;
  const before = [];
  let chunks = 0;
  while (chunks < options.cancelAfter) {
    const message = await withTimeout(session.nextUpdate(), 30000, "a chunk");
    if (message.kind === "stop") throw new Error("the turn ended before the Stop");
    before.push(message.update);
    if (message.update.sessionUpdate === "agent_message_chunk") chunks += 1;
  }
  await ctx.notify("session/cancel", { sessionId: session.sessionId });
  const rest = await untilIdle(session);
  summary.stopReason = rest.stopReason;
  const stopped = [...before, ...rest.updates];
  summary.stoppedText = chunkText(stopped);
  summary.stoppedMessageIds = [
    ...new Set(
      stopped.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.messageId),
    ),
  ];

  // Nothing of the stopped turn after its idle: the follow-up's first update
  // is its own running state.
  const second = await session.prompt("second");
  summary.secondMessageId = second.messageId;
  const followUp = await untilIdle(session);
  summary.followUpFirst = followUp.updates[0] ?? null;
  summary.followUpStopReason = followUp.stopReason;
  summary.followUpText = chunkText(followUp.updates);

  // A command the agent runs itself, after a permission.
  await session.prompt("run it");
  const ran = await untilIdle(session);
  summary.commandStopReason = ran.stopReason;
  summary.commandUpdates = ran.updates;
  summary.commandText = chunkText(ran.updates);
  session.dispose();
}

async function resumeProcess(ctx, options, summary, replayed) {
  await ctx.request("session/resume", {
    sessionId: options.resume,
    cwd: options.cwd,
    replayFrom: { type: "start" },
  });
  summary.replayed = replayed;
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const child = spawn(options.command[0], options.command.slice(1), {
    stdio: ["pipe", "pipe", "inherit"],
    env: process.env,
  });
  child.stdin.on("error", () => {});
  const toAgent = tap("send");
  toAgent.readable.pipeTo(Writable.toWeb(child.stdin)).catch(() => {});
  const fromAgent = Readable.toWeb(child.stdout).pipeThrough(tap("recv"));
  const stream = acp.ndJsonStream(toAgent.writable, fromAgent);

  const summary = { permissions: [] };
  const replayed = [];
  let app = acp.client({ name: "acp-bridge-ts-v2", version: "0.0.0" });
  app = app.onRequest("session/request_permission", ({ params }) => {
    summary.permissions.push(params);
    return { outcome: { outcome: "selected", optionId: "allow_once" } };
  });
  if (options.resume) {
    app = app.onNotification("session/update", ({ params }) => {
      replayed.push(params.update);
    });
  }
  let status = 0;
  try {
    await app.connectWith(stream, async (ctx) => {
      summary.initialize = await ctx.request("initialize", {
        protocolVersion: 2,
        info: { name: "acp-bridge-ts-v2", version: "0.0.0" },
        capabilities: {},
      });
      if (options.resume) await resumeProcess(ctx, options, summary, replayed);
      else await firstProcess(ctx, options, summary);
    });
  } catch (error) {
    summary.error = String(error?.stack ?? error);
    status = 2;
  }
  child.stdin.end();
  await new Promise((resolve) => {
    if (child.exitCode !== null) resolve();
    else child.on("exit", resolve);
  });
  if (options.frames) {
    writeFileSync(options.frames, frames.map((f) => JSON.stringify(f)).join("\n") + "\n");
  }
  process.stdout.write(JSON.stringify(summary) + "\n");
  process.exit(status);
}

main();
