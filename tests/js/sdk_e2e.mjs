// The official SDKs against a running deepinfer server (port in argv[2]): every reply must parse,
// reasoning and tool calls must come out in each API's own shape, stream == non-stream.
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const port = process.argv[2];
const base = `http://127.0.0.1:${port}`;
const model = "deepseek-v4-flash";
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: "unused", maxRetries: 0 });

const tools = [{ type: "function", function: { name: "get_weather", description: "Weather",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const history = [
  { role: "user", content: "Weather in Paris?" },
  { role: "assistant", content: "", tool_calls: [{ id: "call_1", type: "function",
    function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }] },
  { role: "tool", tool_call_id: "call_1", content: "20C" },
];

async function chat() {
  for (const thinking of ["enabled", "disabled"]) {
    const body = { model, messages: history, tools, thinking: { type: thinking } };
    const full = await openai.chat.completions.create(body);
    const msg = full.choices[0].message;
    assert.equal(msg.tool_calls[0].function.name, "get_weather");
    assert.deepEqual(JSON.parse(msg.tool_calls[0].function.arguments), { city: "Paris" });
    if (thinking === "enabled") assert.equal(msg.reasoning_content, "Let me check the weather.");
    const stream = await openai.chat.completions.create({ ...body, stream: true,
      stream_options: { include_usage: true } });
    let content = "", args = "";
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta ?? {};
      if (typeof d.content === "string") content += d.content;
      for (const tc of d.tool_calls ?? []) args += tc.function?.arguments ?? "";
    }
    assert.equal(content, msg.content);
    assert.equal(args, msg.tool_calls[0].function.arguments);
  }
}

async function responses() {
  const body = { model, input: [
    { role: "user", content: "Weather in Paris?" },
    { type: "function_call", call_id: "c1", name: "get_weather", arguments: "{\"city\":\"Paris\"}" },
    { type: "function_call_output", call_id: "c1", output: "20C" }],
    tools: [{ type: "function", name: "get_weather", parameters: tools[0].function.parameters }] };
  const full = await openai.responses.create(body);
  assert.equal(full.status, "completed");
  const call = full.output.find((o) => o.type === "function_call");
  assert.deepEqual(JSON.parse(call.arguments), { city: "Paris" });
  const stream = await openai.responses.create({ ...body, stream: true });
  let completed;
  for await (const event of stream) if (event.type === "response.completed") completed = event.response;
  assert.deepEqual(completed.output.map((o) => o.type), full.output.map((o) => o.type));
  // Same text and arguments item by item (ids differ per response).
  const essence = (o) => o.type === "function_call" ? [o.name, o.arguments]
    : (o.content ?? []).map((p) => p.text);
  assert.deepEqual(completed.output.map(essence), full.output.map(essence));
  await responsesLogprobs(body);
}

// Responses logprobs (include + top_logprobs): the message text's tokens on the output_text
// part; the stream's delta logprobs together equal them (same seed).
async function responsesLogprobs(base) {
  const body = { ...base, include: ["message.output_text.logprobs"], top_logprobs: 2, seed: 11 };
  const full = await openai.responses.create(body);
  const part = full.output.find((o) => o.type === "message").content[0];
  assert.equal(part.type, "output_text");
  assert.ok(part.logprobs.length > 0);
  assert.equal(part.logprobs.map((l) => l.token).join("").slice(0, part.text.length), part.text);
  for (const l of part.logprobs) {
    assert.equal(typeof l.logprob, "number");
    assert.ok(Array.isArray(l.bytes));
    assert.equal(l.top_logprobs.length, 2);
    assert.ok(l.top_logprobs[0].logprob >= l.top_logprobs[1].logprob);
  }
  assert.equal(full.output_text, part.text);  // the SDK's own accessor
  const stream = await openai.responses.create({ ...body, stream: true });
  const deltas = [];
  let done;
  for await (const event of stream) {
    if (event.type === "response.output_text.delta") deltas.push(...event.logprobs);
    if (event.type === "response.output_text.done") done = event.logprobs;
  }
  assert.deepEqual(deltas, part.logprobs);
  assert.deepEqual(done, part.logprobs);
  // The stream helper accumulates the same response.
  const final = await openai.responses.stream(body).finalResponse();
  assert.deepEqual(final.output.find((o) => o.type === "message").content[0].logprobs,
    part.logprobs);
}

async function messages() {
  for (const thinking of [true, false]) {
    const body = { model, max_tokens: 256,
      messages: [{ role: "user", content: "Weather in Paris?" },
        { role: "assistant", content: [{ type: "tool_use", id: "tu1", name: "get_weather", input: { city: "Paris" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "tu1", content: "20C" }] }],
      tools: [{ name: "get_weather", input_schema: tools[0].function.parameters }],
      thinking: thinking ? { type: "enabled", budget_tokens: 1024 } : { type: "disabled" } };
    const full = await anthropic.messages.create(body);
    assert.equal(full.stop_reason, "tool_use");
    const use = full.content.find((b) => b.type === "tool_use");
    assert.deepEqual(use.input, { city: "Paris" });
    if (thinking) assert.equal(full.content[0].type, "thinking");
    const final = await anthropic.messages.stream(body).finalMessage();
    assert.deepEqual(final.content.map((b) => b.type), full.content.map((b) => b.type));
    assert.deepEqual(final.content.find((b) => b.type === "tool_use").input, { city: "Paris" });
    const essence = (b) => b.type === "tool_use" ? [b.name, b.input] : (b.text ?? b.thinking);
    assert.deepEqual(final.content.map(essence), full.content.map(essence));
  }
}

// n > 1 on a stream: the SDK's stream helper accumulates each choice by its index (content,
// tool calls, logprobs); the result must equal the non-stream reply with the same seed.
async function chatChoices() {
  const body = { model, messages: history.slice(0, 1), tools, n: 2, seed: 3, logprobs: true,
    top_logprobs: 2 };
  const full = await openai.chat.completions.create(body);
  assert.equal(full.choices.length, 2);
  const final = await openai.chat.completions
    .stream({ ...body, stream_options: { include_usage: true } }).finalChatCompletion();
  assert.equal(final.choices.length, 2);
  for (const c of final.choices) {
    const f = full.choices[c.index];
    assert.equal(c.message.content, f.message.content);
    assert.deepEqual(c.message.tool_calls.map((t) => t.function),
      f.message.tool_calls.map((t) => t.function));
    assert.equal(c.finish_reason, f.finish_reason);
    assert.ok(f.logprobs.content.length > 0);
    assert.deepEqual(c.logprobs.content, f.logprobs.content);
  }
  assert.equal(final.usage.completion_tokens, full.usage.completion_tokens);
  // Raw chunks: each choice finishes once; the usage chunk comes last with no choices.
  const stream = await openai.chat.completions.create({ ...body, stream: true,
    stream_options: { include_usage: true } });
  const finishes = [0, 0];
  let last;
  for await (const chunk of stream) {
    for (const c of chunk.choices) if (c.finish_reason) finishes[c.index] += 1;
    last = chunk;
  }
  assert.deepEqual(finishes, [1, 1]);
  assert.equal(last.choices.length, 0);
  assert.equal(last.usage.completion_tokens, full.usage.completion_tokens);
}

// Legacy Completions with logprobs: N and n = 2, stream and not.
async function legacy() {
  const body = { model, prompt: "Once upon a time", max_tokens: 24, logprobs: 2, n: 2, seed: 5 };
  const full = await openai.completions.create(body);
  assert.equal(full.choices.length, 2);
  const stream = await openai.completions.create({ ...body, stream: true,
    stream_options: { include_usage: true } });
  const text = ["", ""];
  const tokens = [[], []];
  const offsets = [[], []];
  let usage;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text[c.index] += c.text;
      tokens[c.index].push(...(c.logprobs?.tokens ?? []));
      offsets[c.index].push(...(c.logprobs?.text_offset ?? []));
    }
  }
  for (const c of full.choices) {
    assert.equal(text[c.index], c.text);
    assert.equal(c.logprobs.tokens.length, 24);
    assert.equal(c.logprobs.top_logprobs.length, 24);
    assert.deepEqual(tokens[c.index], c.logprobs.tokens);
    assert.deepEqual(offsets[c.index], c.logprobs.text_offset);
  }
  assert.equal(usage.completion_tokens, full.usage.completion_tokens);
}

try {
  await chat();
  await chatChoices();
  await legacy();
  await responses();
  await messages();
  console.log("sdk e2e: ok");
} catch (e) {
  console.error("sdk e2e failed:", e);
  process.exit(1);
}
