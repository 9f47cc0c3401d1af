// The LangGraph JS SDK (@langchain/langgraph-sdk, pinned in package-lock.json)
// against agentsite's /langgraph/: stream, wait and an interrupt's resume.
// Run by tests/langgraph_api/test_js_sdk.py with LANGGRAPH_URL and API_KEY;
// prints one JSON object with what it saw, and exits non-zero on any error.
import { isDeepStrictEqual } from "node:util";

import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.LANGGRAPH_URL, apiKey: process.env.API_KEY });
const out = {};

const info = await fetch(`${process.env.LANGGRAPH_URL}/info`, { headers: { "X-Api-Key": process.env.API_KEY } });
out.info_ok = info.ok;

const thread = await client.threads.create({ metadata: { from: "js" } });
out.thread_id = thread.thread_id;

// useStream's way: content blocks, values + messages-tuple, resumable, continue on disconnect.
const parts = [];
let created = null;
for await (const part of client.runs.stream(thread.thread_id, "intake", {
  input: { messages: [{ type: "human", content: [{ type: "text", text: "Hello, my name is Ada Lovelace" }] }] },
  streamMode: ["values", "messages-tuple"],
  streamResumable: true,
  onDisconnect: "continue",
  onRunCreated: (meta) => { created = meta; },
})) {
  parts.push(part);
}
out.events = parts.map((p) => p.event);
out.ids = parts.map((p) => p.id);
out.run_created = created;
out.metadata = parts[0].data;
const lastValues = parts.filter((p) => p.event === "values").at(-1).data;
const reply = lastValues.messages.at(-1);
out.reply = reply.content;
out.streamed_reply = parts
  .filter((p) => p.event === "messages" && p.data[0].id === reply.id)
  .map((p) => p.data[0].content)
  .join("");

const waited = await client.runs.wait(thread.thread_id, "intake", {
  input: { messages: [{ type: "human", content: "ada@example.com" }] },
});
const state = await client.threads.getState(thread.thread_id);
// Equal as JSON values: the order of an object's keys is not part of them
// (PostgreSQL's jsonb keeps its own; a wait answered from the process's
// conversation cache keeps LangChain's).
out.wait_equals_state = isDeepStrictEqual(waited, state.values);
out.history_sources = (await client.threads.getHistory(thread.thread_id, { limit: 10 })).map((h) => h.metadata.source);

// An interrupt and its resume, as agent-chat-ui sends it (input {} plus command).
const booking = await client.threads.create();
const paused = [];
for await (const part of client.runs.stream(booking.thread_id, "booking", {
  input: { messages: [{ type: "human", content: "Book a table for 2 people on 2031-05-01 at 19:30, my name is Ada Lovelace" }] },
  streamMode: ["values"],
})) {
  paused.push(part);
}
out.interrupt = paused.filter((p) => p.event === "values").at(-1).data.__interrupt__;
out.thread_status = (await client.threads.get(booking.thread_id)).status;
const resumed = await client.runs.wait(booking.thread_id, "booking", { input: {}, command: { resume: { decisions: [{ type: "approve" }] } } });
out.resumed_reply = resumed.messages.at(-1).content;

// A 404 as an Error carrying the status.
try {
  await client.threads.get("no-such-thread");
  out.missing = "found";
} catch (error) {
  out.missing = error.status ?? String(error);
}
await client.threads.delete(booking.thread_id);

console.log(JSON.stringify(out));
