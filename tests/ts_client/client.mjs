#!/usr/bin/env node
// An ACP client built on the official TypeScript SDK (@agentclientprotocol/sdk),
// used by tests/test_ts_sdk_client.py to drive acp-bridge the way a Node-based
// editor would.
//
// Usage:
//   node client.mjs [--frames FILE] [--cancel-after K] [--cwd DIR]
//                   [--timeout-ms MS] [--grace-ms MS] -- AGENT_COMMAND [ARGS...]
//
// Without "-- AGENT_COMMAND", the command is read from the environment variable
// ACP_AGENT_COMMAND, a JSON array of strings.
//
// The session: initialize, session/new, a prompt that is cancelled after K
// agent_message_chunk updates, then a follow-up prompt that runs to its end.
// Every raw line on the agent's stdin and stdout is recorded, in the order
// the client wrote or read it, and written to FILE as JSON lines
// {"dir": "send" | "recv", "t_ms": ..., "line": "<raw line>"}; a last line
// the agent did not terminate with "\n" gets "partial": true.
//
// stdout gets one JSON summary; the agent's stderr goes to this process's
// stderr.  Exit status: 0 if every check passed, 1 if a check failed, 2 if the
// session could not run at all (the summary then has "error").

import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const FIRST_PROMPT = "Tell me a story about a lighthouse keeper.";
const FOLLOW_UP_PROMPT = "Expand on your second point.";

function parseArgs(argv) {
  const options = {
    frames: null,
    cancelAfter: 5,
    cwd: process.cwd(),
    timeoutMs: 30000,
    graceMs: 300,
    command: null,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
      return argv[++i];
    };
    if (arg === "--") {
      options.command = argv.slice(i + 1);
      break;
    } else if (arg === "--frames") options.frames = value();
    else if (arg === "--cancel-after") options.cancelAfter = Number.parseInt(value(), 10);
    else if (arg === "--cwd") options.cwd = value();
    else if (arg === "--timeout-ms") options.timeoutMs = Number.parseInt(value(), 10);
    else if (arg === "--grace-ms") options.graceMs = Number.parseInt(value(), 10);
    else throw new Error(`unknown argument ${JSON.stringify(arg)}`);
  }
  if (!options.command || options.command.length === 0) {
    const fromEnv = process.env.ACP_AGENT_COMMAND;
    if (!fromEnv) throw new Error("no agent command: pass it after -- or set ACP_AGENT_COMMAND");
    options.command = JSON.parse(fromEnv);
  }
  if (!Array.isArray(options.command) || !options.command.every((s) => typeof s === "string")) {
    throw new Error("the agent command must be a list of strings");
  }
  if (!(options.cancelAfter >= 1)) throw new Error("--cancel-after must be at least 1");
  return options;
}

// -- raw frame recording ----------------------------------------------------

const started = performance.now();
const frames = [];

function lineRecorder(dir) {
  const decoder = new TextDecoder();
  let pending = "";
  return {
    push(bytes) {
      pending += decoder.decode(bytes, { stream: true });
      let newline;
      while ((newline = pending.indexOf("\n")) !== -1) {
        frames.push({ dir, t_ms: performance.now() - started, line: pending.slice(0, newline) });
        pending = pending.slice(newline + 1);
      }
    },
    flush() {
      pending += decoder.decode();
      if (pending !== "") {
        frames.push({ dir, t_ms: performance.now() - started, line: pending, partial: true });
        pending = "";
      }
    },
  };
}

// A byte stream that passes everything through unchanged and records each line.
function tap(dir) {
  const recorder = lineRecorder(dir);
  return new TransformStream({
    transform(chunk, controller) {
      recorder.push(chunk);
      controller.enqueue(chunk);
    },
    flush() {
      recorder.flush();
    },
  });
}

// -- helpers ------------------------------------------------------------------

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The scripted model's `report` answer: one "name: value" line per fact, the
// value as JSON.
function parseReport(text) {
  const facts = {};
  for (const line of text.split("\n")) {
    const colon = line.indexOf(": ");
    if (colon === -1) continue;
    const name = line.slice(0, colon).trim();
    try {
      facts[name] = JSON.parse(line.slice(colon + 2));
    } catch {
      facts[name] = line.slice(colon + 2);
    }
  }
  return facts;
}

// Updates on the wire after a prompt's response: session/update frames read
// after the response frame, up to the next prompt request the client wrote.
function wireUpdatesAfterResponse(requestId) {
  let sent = -1;
  for (let i = 0; i < frames.length; i++) {
    const msg = parsedFrame(i);
    if (frames[i].dir === "send" && msg?.method === "session/prompt" && msg.id === requestId) {
      sent = i;
      break;
    }
  }
  if (sent === -1) return null;
  let late = 0;
  let answered = false;
  for (let i = sent + 1; i < frames.length; i++) {
    const msg = parsedFrame(i);
    if (frames[i].dir === "send" && msg?.method === "session/prompt") break;
    if (frames[i].dir !== "recv" || msg === null) continue;
    if (!answered && msg.id === requestId && !("method" in msg)) answered = true;
    else if (answered && msg.method === "session/update") late++;
  }
  return answered ? late : null;
}

function parsedFrame(i) {
  try {
    const msg = JSON.parse(frames[i].line);
    return msg !== null && typeof msg === "object" ? msg : null;
  } catch {
    return null;
  }
}

// The ids of the requests the client wrote for `method`, in wire order.
function requestIds(method) {
  const ids = [];
  for (let i = 0; i < frames.length; i++) {
    const msg = parsedFrame(i);
    if (frames[i].dir === "send" && msg?.method === method && "id" in msg) ids.push(msg.id);
  }
  return ids;
}

// -- the session ------------------------------------------------------------

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const summary = { ok: false, problems: [], command: options.command, cancelAfter: options.cancelAfter };
  const check = (condition, problem) => {
    if (!condition) summary.problems.push(problem);
  };

  const child = spawn(options.command[0], options.command.slice(1), {
    stdio: ["pipe", "pipe", "inherit"],
    env: process.env,
  });
  const exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => resolve({ code, signal }));
    child.on("error", (error) => resolve({ code: null, signal: null, error: String(error) }));
  });
  child.stdin.on("error", () => {}); // EPIPE if the agent dies; reported through the exit status

  const toAgent = tap("send");
  toAgent.readable.pipeTo(Writable.toWeb(child.stdin)).catch(() => {});
  const fromAgent = Readable.toWeb(child.stdout).pipeThrough(tap("recv"));
  const stream = acp.ndJsonStream(toAgent.writable, fromAgent);

  // What the SDK delivered to this client, per prompt.
  let current = null;
  const prompts = [];
  const unexpectedRequests = [];

  const app = acp
    .client({ name: "acp-bridge-ts-conformance" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      const turn = current;
      if (params.update.sessionUpdate === "available_commands_update") {
        // About the session, sent as it opens (before any prompt): the SDK
        // parsed it, so its schema held; keep the names.
        summary.commands = params.update.availableCommands.map((c) => c.name);
        return;
      }
      if (turn === null) {
        summary.problems.push(`session/update outside any prompt: ${JSON.stringify(params)}`);
        return;
      }
      const update = params.update;
      if (params.sessionId !== turn.sessionId) {
        summary.problems.push(`session/update for another session: ${params.sessionId}`);
      }
      if (turn.responded) turn.sdkUpdatesAfterResponse++;
      turn.updates++;
      turn.updateKinds[update.sessionUpdate] = (turn.updateKinds[update.sessionUpdate] ?? 0) + 1;
      if (update.sessionUpdate === "agent_message_chunk" && update.content.type === "text") {
        turn.chunks++;
        turn.text += update.content.text;
        if (turn.waiter !== null && turn.chunks >= turn.waiter.count) {
          turn.waiter.resolve();
          turn.waiter = null;
        }
      }
    })
    // The scripts used here never ask for a permission, and the client
    // advertises no fs or terminal capability: any request is a problem.
    .onRequest(acp.methods.client.session.requestPermission, () => {
      unexpectedRequests.push("session/request_permission");
      return { outcome: { outcome: "cancelled" } };
    })
    .onRequest("*", ({ method }) => {
      unexpectedRequests.push(method);
      throw acp.RequestError.methodNotFound(method);
    });

  const newTurn = (label, sessionId) => {
    const turn = {
      label,
      sessionId,
      requestId: null,
      stopReason: null,
      updates: 0,
      updateKinds: {},
      chunks: 0,
      text: "",
      textAtCancel: null,
      chunksAtCancel: null,
      responded: false,
      sdkUpdatesAfterResponse: 0,
      wireUpdatesAfterResponse: null,
      waiter: null,
    };
    prompts.push(turn);
    current = turn;
    return turn;
  };

  const chunksSeen = (turn, count) =>
    new Promise((resolve) => {
      if (turn.chunks >= count) resolve();
      else turn.waiter = { count, resolve };
    });

  const session = async (ctx) => {
    const t = options.timeoutMs;
    const init = await withTimeout(
      ctx.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: { name: "acp-bridge-ts-conformance", version: "0.0.0" },
      }),
      t,
      "initialize",
    );
    summary.initialize = init;
    check(init.protocolVersion === 1, `initialize: protocolVersion ${JSON.stringify(init.protocolVersion)}, expected 1`);
    check(
      typeof init.agentInfo?.name === "string" && typeof init.agentInfo?.version === "string",
      `initialize: agentInfo ${JSON.stringify(init.agentInfo)} lacks a name and a version`,
    );

    const created = await withTimeout(
      ctx.request(acp.methods.agent.session.new, { cwd: options.cwd, mcpServers: [] }),
      t,
      "session/new",
    );
    const sessionId = created.sessionId;
    summary.sessionId = sessionId;
    check(typeof sessionId === "string" && sessionId !== "", "session/new: no sessionId");

    // 1. A streamed prompt, cancelled after K chunks.
    const first = newTurn("cancelled", sessionId);
    const firstAnswer = ctx.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: FIRST_PROMPT }],
    });
    await withTimeout(
      Promise.race([chunksSeen(first, options.cancelAfter), firstAnswer]),
      t,
      `${options.cancelAfter} agent_message_chunk updates`,
    );
    check(
      first.chunks >= options.cancelAfter,
      `prompt 1 ended before ${options.cancelAfter} chunks arrived (got ${first.chunks})`,
    );
    first.textAtCancel = first.text;
    first.chunksAtCancel = first.chunks;
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
    const firstResult = await withTimeout(firstAnswer, t, "the cancelled prompt's response");
    first.responded = true;
    first.stopReason = firstResult.stopReason;
    first.textAtResponse = first.text;
    check(firstResult.stopReason === "cancelled", `prompt 1: stopReason ${JSON.stringify(firstResult.stopReason)}, expected "cancelled"`);
    // Give a late update the time to show up before the next request.
    await sleep(options.graceMs);

    // 2. A follow-up that runs to its end; its answer reports what the model received.
    const second = newTurn("follow-up", sessionId);
    const secondAnswer = ctx.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: FOLLOW_UP_PROMPT }],
    });
    const secondResult = await withTimeout(secondAnswer, t, "the follow-up prompt's response");
    second.responded = true;
    second.stopReason = secondResult.stopReason;
    second.textAtResponse = second.text;
    check(secondResult.stopReason === "end_turn", `prompt 2: stopReason ${JSON.stringify(secondResult.stopReason)}, expected "end_turn"`);
    await sleep(options.graceMs);
    current = null;

    summary.report = parseReport(second.text);
    check(
      summary.report.last_assistant_text === first.textAtResponse,
      `the model was sent ${JSON.stringify(summary.report.last_assistant_text)} as the interrupted reply; ` +
        `the client was shown ${JSON.stringify(first.textAtResponse)}`,
    );
    check(summary.report.last_assistant_interrupted === true, "the model was not told the reply was interrupted");
  };

  try {
    await withTimeout(app.connectWith(stream, session), options.timeoutMs * 4, "the session");
  } catch (error) {
    summary.error = String(error?.stack ?? error);
  }
  // Close the agent's stdin like an editor that quits, and wait for it to exit.
  child.stdin.end();
  const exit = await withTimeout(exited, 10000, "agent exit").catch(() => null);
  if (exit === null) {
    child.kill("SIGKILL");
    summary.exit = { ...(await exited), killed: true };
  } else {
    summary.exit = exit;
  }
  check(summary.exit.code === 0, `the agent exited with ${JSON.stringify(summary.exit)}`);
  check(unexpectedRequests.length === 0, `unexpected agent requests: ${unexpectedRequests.join(", ")}`);

  const promptIds = requestIds(acp.methods.agent.session.prompt);
  check(promptIds.length === prompts.length, `${promptIds.length} session/prompt requests on the wire`);
  for (const [i, turn] of prompts.entries()) {
    turn.requestId = promptIds[i] ?? null;
    turn.wireUpdatesAfterResponse = turn.requestId === null ? null : wireUpdatesAfterResponse(turn.requestId);
    check(turn.sdkUpdatesAfterResponse === 0, `${turn.label}: ${turn.sdkUpdatesAfterResponse} updates after the response (SDK)`);
    check(turn.wireUpdatesAfterResponse === 0, `${turn.label}: ${turn.wireUpdatesAfterResponse} updates after the response (wire)`);
    delete turn.waiter;
    delete turn.responded;
  }
  summary.prompts = prompts;
  summary.frames = {
    file: options.frames,
    sent: frames.filter((f) => f.dir === "send").length,
    received: frames.filter((f) => f.dir === "recv").length,
  };
  if (options.frames) {
    writeFileSync(options.frames, frames.map((f) => JSON.stringify(f) + "\n").join(""));
  }
  summary.ok = summary.error === undefined && summary.problems.length === 0;
  process.stdout.write(JSON.stringify(summary, null, 2) + "\n");
  return summary.error !== undefined ? 2 : summary.ok ? 0 : 1;
}

main().then(
  (status) => {
    process.exitCode = status;
  },
  (error) => {
    process.stdout.write(JSON.stringify({ ok: false, error: String(error?.stack ?? error) }) + "\n");
    process.exitCode = 2;
  },
);
