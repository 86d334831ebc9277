// The official openai package against a running pvllm-server: every
// OpenAI endpoint the server implements, streaming and not, and its
// errors as the client sees them; /tokenize, /detokenize, /health and
// /metrics with fetch. scripts/server_check.sh starts the server on the
// stories260K model with a chat template and sets:
//   PVLLM_SERVER_URL  http://HOST:PORT
//   PVLLM_API_KEY     the server's --api-key
//   PVLLM_MODEL       the served model's name
import assert from "node:assert/strict";
import { test } from "node:test";
import OpenAI from "openai";

const base = process.env.PVLLM_SERVER_URL;
const apiKey = process.env.PVLLM_API_KEY;
const model = process.env.PVLLM_MODEL;
assert.ok(base && apiKey && model, "PVLLM_SERVER_URL, PVLLM_API_KEY and PVLLM_MODEL must be set");
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 60_000 });
const messages = [{ role: "user", content: "Once upon a time" }];

async function collectChat(stream) {
  const texts = new Map();
  const finishes = new Map();
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      texts.set(c.index, (texts.get(c.index) ?? "") + (c.delta.content ?? ""));
      if (c.finish_reason) finishes.set(c.index, c.finish_reason);
    }
  }
  return { texts, finishes, usage, chunks };
}

test("models: list and retrieve", async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [model]);
  const one = await client.models.retrieve(model);
  assert.equal(one.id, model);
  assert.equal(one.object, "model");
  await assert.rejects(client.models.retrieve("gpt-4"), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.code, "model_not_found");
    return true;
  });
});

test("chat: a greedy answer, the same streamed", async () => {
  const params = { model, messages, max_completion_tokens: 24, temperature: 0, ignore_eos: true };
  const whole = await client.chat.completions.create(params);
  assert.equal(whole.object, "chat.completion");
  assert.equal(whole.choices.length, 1);
  const answer = whole.choices[0].message.content;
  assert.equal(whole.choices[0].message.role, "assistant");
  assert.equal(whole.choices[0].finish_reason, "length");
  assert.match(answer, /[a-z]{3,}/, "an English continuation");
  assert.equal(whole.usage.completion_tokens, 24);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + 24);

  const streamed = await collectChat(await client.chat.completions.create({
    ...params, stream: true, stream_options: { include_usage: true },
  }));
  assert.equal(streamed.texts.get(0), answer);
  assert.equal(streamed.finishes.get(0), "length");
  assert.deepEqual(streamed.usage, whole.usage);
  assert.ok(streamed.chunks >= 24, `${streamed.chunks} chunks for 24 tokens`);
});

test("chat: n, seed, logprobs and stop", async () => {
  const params = { model, messages, max_tokens: 12, temperature: 0.9, seed: 11, n: 3,
                   logprobs: true, top_logprobs: 2, ignore_eos: true };
  const a = await client.chat.completions.create(params);
  const b = await client.chat.completions.create(params);
  assert.equal(a.choices.length, 3);
  assert.deepEqual(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content));
  for (const c of a.choices) {
    assert.equal(c.logprobs.content.length, 12);
    for (const t of c.logprobs.content) {
      assert.ok(t.logprob <= 0);
      assert.ok(t.top_logprobs.length >= 1 && t.top_logprobs.length <= 2);
      assert.deepEqual(t.bytes, [...Buffer.from(t.token, "utf8")]);
    }
    assert.equal(c.logprobs.content.map((t) => t.token).join(""), c.message.content);
  }
  // Stop on a word of the greedy answer: the text ends before it.
  const greedy = await client.chat.completions.create({ model, messages, max_tokens: 30,
                                                        temperature: 0, ignore_eos: true });
  const text = greedy.choices[0].message.content;
  const word = text.split(" ").filter((w) => /^[a-z]{3,}$/.test(w))[1];
  assert.ok(word, `a stop word in ${JSON.stringify(text)}`);
  const stopped = await client.chat.completions.create({ model, messages, max_tokens: 30,
                                                         temperature: 0, stop: [` ${word}`], ignore_eos: true });
  assert.equal(stopped.choices[0].finish_reason, "stop");
  assert.equal(stopped.choices[0].message.content, text.slice(0, text.indexOf(` ${word}`)));
});

test("completions: text and token prompts, streaming, logprobs", async () => {
  const whole = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 16,
                                                  temperature: 0, logprobs: 2 });
  assert.equal(whole.object, "text_completion");
  const text = whole.choices[0].text;
  assert.ok(text.startsWith(", there was"), JSON.stringify(text));
  assert.equal(whole.choices[0].logprobs.tokens.join(""), text);
  assert.equal(whole.choices[0].logprobs.text_offset[0], 0);

  let streamed = "";
  let usage = null;
  for await (const chunk of await client.completions.create({
    model, prompt: "Once upon a time", max_tokens: 16, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  })) {
    for (const c of chunk.choices) streamed += c.text;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(streamed, text);
  assert.equal(usage.completion_tokens, 16);

  const many = await client.completions.create({ model, prompt: ["Once upon a time", "Lily"],
                                                 n: 2, max_tokens: 5, ignore_eos: true });
  assert.deepEqual(many.choices.map((c) => c.index), [0, 1, 2, 3]);
  assert.equal(many.usage.completion_tokens, 20);

  const tok = await (await fetch(`${base}/tokenize`, {
    method: "POST", headers: { Authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ model, prompt: "Once upon a time" }),
  })).json();
  const byIds = await client.completions.create({ model, prompt: tok.tokens, max_tokens: 16,
                                                  temperature: 0 });
  assert.equal(byIds.choices[0].text, text);
});

test("tokenize and detokenize", async () => {
  const post = async (path, body) => {
    const r = await fetch(`${base}${path}`, { method: "POST",
      headers: { Authorization: `Bearer ${apiKey}` }, body: JSON.stringify(body) });
    return [r.status, await r.json()];
  };
  const [s1, tok] = await post("/tokenize", { prompt: "Once upon a time", add_special_tokens: false });
  assert.equal(s1, 200);
  assert.equal(tok.count, tok.tokens.length);
  assert.ok(tok.max_model_len > 0);
  const [s2, detok] = await post("/detokenize", { tokens: tok.tokens });
  assert.equal(s2, 200);
  assert.equal(detok.prompt, "Once upon a time");
  const [s3, chat] = await post("/tokenize", { messages });
  const answer = await client.chat.completions.create({ model, messages, max_tokens: 1 });
  assert.equal(s3, 200);
  assert.equal(chat.count, answer.usage.prompt_tokens);
});

test("errors as the client sees them", async () => {
  await assert.rejects(
    client.chat.completions.create({ model, messages, frequency_penalty: 0, frobnicate: true }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === "frobnicate" &&
           e.code === "unsupported_parameter");
  await assert.rejects(
    client.completions.create({ model, prompt: "x", echo: true }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === "echo");
  await assert.rejects(
    client.chat.completions.create({ model, messages, max_tokens: 100000 }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === "context_length_exceeded");
  await assert.rejects(
    client.chat.completions.create({ model, messages: [] }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === "messages");
  const stranger = new OpenAI({ baseURL: `${base}/v1`, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(stranger.models.list(),
    (e) => e instanceof OpenAI.AuthenticationError && e.code === "invalid_api_key");
  await assert.rejects(
    client.completions.create({ model, prompt: "x".repeat(9 << 20) }),
    (e) => e instanceof OpenAI.APIError && e.status === 413);
});

test("health and metrics", async () => {
  const health = await fetch(`${base}/health`);
  assert.equal(health.status, 200);
  const metrics = await (await fetch(`${base}/metrics`)).text();
  const value = (name) => {
    const line = metrics.split("\n").find((l) => l.startsWith(name + " "));
    return line === undefined ? NaN : Number(line.split(" ")[1]);
  };
  assert.ok(value('pvllm_time_to_first_token_seconds_count{endpoint="chat"}') > 0);
  assert.ok(value('pvllm_e2e_request_latency_seconds_count{endpoint="completions"}') > 0);
  assert.ok(value('pvllm_http_responses_total{code="400",route="/v1/chat/completions"}') >= 3);
  assert.ok(value('pvllm_http_responses_total{code="401",route="/v1/models"}') >= 1);
});
