// The official openai package against a running pvllm-server: every
// OpenAI endpoint the server implements, streaming and not, and its
// errors as the client sees them; structured output (response_format)
// validated with ajv; /tokenize, /detokenize, /health and
// /metrics with fetch. scripts/server_check.sh starts the server on the
// stories260K model with a chat template and sets:
//   PVLLM_SERVER_URL  http://HOST:PORT
//   PVLLM_API_KEY     the server's --api-key
//   PVLLM_MODEL       the served model's name
import assert from "node:assert/strict";
import { test } from "node:test";
import Ajv from "ajv";
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

// Whether text begins a JSON object that max_tokens cut short: some ending
// of its last token, and the brackets it leaves open, make it one.
function startsJSONObject(text) {
  let inString = false;
  let escaped = false;
  const open = [];
  for (const ch of text) {
    if (inString) {
      if (escaped) escaped = false;
      else if (ch === "\\") escaped = true;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === "{") open.push("}");
    else if (ch === "[") open.push("]");
    else if (ch === "}" || ch === "]") open.pop();
  }
  const close = open.reverse().join("");
  const ends = inString
    ? ["", "n", "0", "00", "000", "0000"].flatMap((e) => [`${e}"`, `${e}":0`])
    : ["", "0", ":0", '"k":0', "ue", "e", "rue", "alse", "lse", "se", "ull", "ll", "l"];
  return text.startsWith("{") && ends.some((end) => {
    try {
      const v = JSON.parse(text + end + close);
      return typeof v === "object" && v !== null && !Array.isArray(v);
    } catch {
      return false;
    }
  });
}

test("structured output: response_format json_schema and json_object", async () => {
  const schema = {
    type: "object",
    properties: { name: { type: "string", maxLength: 8 }, age: { type: "integer" } },
    required: ["name", "age"],
    additionalProperties: false,
  };
  const validate = new Ajv({ strict: true, allErrors: true }).compile(schema);
  const check = (text, finish) => {
    assert.equal(finish, "stop", `finish_reason of ${JSON.stringify(text)}`);
    const doc = JSON.parse(text);
    assert.ok(validate(doc), `${JSON.stringify(text)}: ${JSON.stringify(validate.errors)}`);
  };
  const response_format = { type: "json_schema", json_schema: { name: "person", strict: true, schema } };
  const params = { model, messages, max_tokens: 100, n: 4, seed: 3, temperature: 1, response_format };
  const whole = await client.chat.completions.create(params);
  assert.equal(whole.choices.length, 4);
  for (const c of whole.choices) check(c.message.content, c.finish_reason);
  const streamed = await collectChat(await client.chat.completions.create({ ...params, stream: true }));
  assert.deepEqual([...streamed.texts.keys()].sort(), [0, 1, 2, 3]);
  for (const c of whole.choices) assert.equal(streamed.texts.get(c.index), c.message.content);
  const greedy = await client.chat.completions.create({ ...params, n: 1, temperature: 0 });
  check(greedy.choices[0].message.content, greedy.choices[0].finish_reason);
  // The completions endpoint takes it too (an extra field to the client).
  const completion = await client.completions.create({ model, prompt: "Once upon a time",
    max_tokens: 100, temperature: 0, response_format });
  check(completion.choices[0].text, completion.choices[0].finish_reason);

  // Any JSON object: a story model seldom closes one, so what max_tokens
  // leaves is its beginning (and the object itself once it stops).
  const objects = await client.chat.completions.create({ model, messages, max_tokens: 32, n: 3,
    seed: 3, response_format: { type: "json_object" } });
  for (const c of objects.choices) {
    const text = c.message.content;
    if (c.finish_reason === "stop") {
      const doc = JSON.parse(text);
      assert.ok(typeof doc === "object" && doc !== null && !Array.isArray(doc), text);
    } else {
      assert.equal(c.finish_reason, "length");
      assert.ok(startsJSONObject(text), `${JSON.stringify(text)} does not begin a JSON object`);
    }
  }
  assert.ok(!startsJSONObject('{"a":1,}') && !startsJSONObject("[1") && startsJSONObject('{"a\\'));

  // Refusals: a schema the engine cannot read, one it does not implement,
  // a response_format type it does not know.
  const withSchema = (s) => client.chat.completions.create({ model, messages, max_tokens: 8,
    response_format: { type: "json_schema", json_schema: { name: "x", schema: s } } });
  await assert.rejects(withSchema({ type: "object", properties: { name: { type: "strin" } } }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === "response_format.json_schema.schema" &&
           e.message.includes("/properties/name"));
  await assert.rejects(withSchema({ type: "array", uniqueItems: true }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === "response_format.json_schema.schema" &&
           e.code === "unsupported_parameter" && e.message.includes('"uniqueItems"'));
  await assert.rejects(
    client.chat.completions.create({ model, messages, response_format: { type: "yaml" } }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === "response_format.type");
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
