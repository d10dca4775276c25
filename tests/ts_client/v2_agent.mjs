#!/usr/bin/env node
// A small ACP v2 agent on the official TypeScript SDK's v2 agent side
// (@agentclientprotocol/sdk/experimental/v2), for tests/test_check_v2.py: what
// `acp-bridge check --protocol 2` and the test kit are checked against.
//
// Usage: node v2_agent.mjs --store FILE [--fault NAME] [--delay-ms MS]
//
// Every prompt is answered at once with its messageId, then the turn reports
// running, echoes the user message, streams the numbers in words (one
// agent_message_chunk every --delay-ms, 2000 at most) and ends idle(end_turn).
// session/cancel stops the stream: the turn ends idle(cancelled), every chunk
// before it.  Sessions are kept in FILE (JSON), so a new process resumes them:
// session/resume with replayFrom {"type": "start"} replays each user message and
// the agent's text under their messageIds, then the state, then answers.
//
// --fault makes it break one promise:
//   chunk-after-idle   three more chunks after idle(cancelled)
//   end-turn           a Stop ends idle(end_turn), not cancelled
//   never-confirm      a Stop ends the stream but no idle follows
//   next-turn          after a Stop, every later prompt ends idle(cancelled) at once
//   resume-no-replay   session/resume ignores replayFrom (the state, no replay)

import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/experimental/v2";

const FAULTS = new Set([
  "chunk-after-idle",
  "end-turn",
  "never-confirm",
  "next-turn",
  "resume-no-replay",
]);

function parseArgs(argv) {
  const options = { store: null, fault: null, delayMs: 10 };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--store") options.store = argv[++i];
    else if (arg === "--fault") options.fault = argv[++i];
    else if (arg === "--delay-ms") options.delayMs = Number(argv[++i]);
    else throw new Error(`unknown argument ${arg}`);
  }
  if (!options.store) throw new Error("--store FILE is required");
  if (options.fault !== null && !FAULTS.has(options.fault)) {
    throw new Error(`unknown fault ${options.fault}`);
  }
  return options;
}

const options = parseArgs(process.argv.slice(2));
const fault = options.fault;

const ONES = ["", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"];
const TEENS = ["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
  "seventeen", "eighteen", "nineteen"];
const TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty",
  "ninety"];

function words(n) {
  if (n >= 1000) return `${ONES[Math.floor(n / 1000)]} thousand ${words(n % 1000)}`.trim();
  if (n >= 100) return `${ONES[Math.floor(n / 100)]} hundred ${words(n % 100)}`.trim();
  if (n >= 20) return `${TENS[Math.floor(n / 10)]} ${ONES[n % 10]}`.trim();
  if (n >= 10) return TEENS[n - 10];
  return ONES[n];
}

// -- sessions, kept in the store ------------------------------------------------

function readStore() {
  if (!existsSync(options.store)) return {};
  return JSON.parse(readFileSync(options.store, "utf-8"));
}

const sessions = new Map(); // id -> {cwd, history: [{userId, agentId, prompt, reply}], turn}

function save(id) {
  const stored = readStore();
  const session = sessions.get(id);
  stored[id] = { cwd: session.cwd, history: session.history };
  writeFileSync(options.store, JSON.stringify(stored));
}

function session(id) {
  const found = sessions.get(id);
  if (!found) throw acp.RequestError.invalidParams({ sessionId: id }, "unknown session");
  return found;
}

// -- turns ----------------------------------------------------------------------

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function update(client, sessionId, body) {
  return client.notify("session/update", { sessionId, update: body });
}

const idle = (stopReason) => ({ sessionUpdate: "state_update", state: "idle", stopReason });

async function runTurn(client, sessionId, state, turn, entry) {
  await update(client, sessionId, { sessionUpdate: "state_update", state: "running" });
  await update(client, sessionId, {
    sessionUpdate: "user_message",
    messageId: entry.userId,
    content: [{ type: "text", text: entry.prompt }],
  });
  for (let n = 1; n <= 2000 && !turn.cancelled; n++) {
    await sleep(options.delayMs);
    if (turn.cancelled) break;
    const text = `${words(n)}\n`;
    entry.reply += text;
    await update(client, sessionId, {
      sessionUpdate: "agent_message_chunk",
      messageId: entry.agentId,
      content: { type: "text", text },
    });
  }
  save(sessionId);
  if (state.turn === turn) state.turn = null;
  if (!turn.cancelled) {
    await update(client, sessionId, idle("end_turn"));
    return;
  }
  state.stopped = true;
  if (fault === "never-confirm") return;
  await update(client, sessionId, idle(fault === "end-turn" ? "end_turn" : "cancelled"));
  if (fault === "chunk-after-idle") {
    for (let n = 0; n < 3; n++) {
      await update(client, sessionId, {
        sessionUpdate: "agent_message_chunk",
        messageId: entry.agentId,
        content: { type: "text", text: "late " },
      });
    }
  }
}

let messages = 0;

const app = acp
  .agent({ name: "acp-bridge-test-v2-agent" })
  .onRequest("initialize", () => ({
    protocolVersion: 2,
    info: { name: "test-v2-agent", version: "0.1.0" },
    capabilities: { session: {} },
  }))
  .onRequest("session/new", ({ params }) => {
    const id = `sess_${randomUUID()}`;
    sessions.set(id, { cwd: params.cwd, history: [], turn: null, stopped: false });
    save(id);
    return { sessionId: id };
  })
  .onRequest("session/prompt", ({ params, client }) => {
    const state = session(params.sessionId);
    messages += 1;
    const entry = {
      userId: `user-${messages}-${randomUUID()}`,
      agentId: `agent-${messages}-${randomUUID()}`,
      prompt: params.prompt.map((b) => (b.type === "text" ? b.text : "")).join(""),
      reply: "",
    };
    state.history.push(entry);
    const turn = { cancelled: fault === "next-turn" && state.stopped };
    state.turn = turn;
    setImmediate(() => {
      runTurn(client, params.sessionId, state, turn, entry).catch((err) => {
        process.stderr.write(`turn failed: ${err}\n`);
      });
    });
    return { messageId: entry.userId };
  })
  .onNotification("session/cancel", ({ params }) => {
    const state = sessions.get(params.sessionId);
    if (state && state.turn) state.turn.cancelled = true;
  })
  .onRequest("session/resume", async ({ params, client }) => {
    const stored = readStore()[params.sessionId];
    if (!stored) throw acp.RequestError.invalidParams({ sessionId: params.sessionId });
    sessions.set(params.sessionId, { ...stored, turn: null, stopped: false });
    const replay = params.replayFrom && fault !== "resume-no-replay";
    if (replay && params.replayFrom.type !== "start") {
      throw acp.RequestError.invalidParams({ replayFrom: params.replayFrom });
    }
    if (replay) {
      for (const entry of stored.history) {
        await update(client, params.sessionId, {
          sessionUpdate: "user_message",
          messageId: entry.userId,
          content: [{ type: "text", text: entry.prompt }],
        });
        await update(client, params.sessionId, {
          sessionUpdate: "agent_message",
          messageId: entry.agentId,
          content: [{ type: "text", text: entry.reply }],
        });
      }
    }
    await update(client, params.sessionId, { sessionUpdate: "state_update", state: "idle" });
    return {};
  });

const connection = app.connect(
  acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)),
);
connection.closed.then(
  () => process.exit(0),
  () => process.exit(0),
);
