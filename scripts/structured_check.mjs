// Structured output checked by validators nobody here wrote: for each model
// and each JSON schema of tests/data/structured, `pvllm generate` writes one
// greedy sample and 16 seeded samples at temperature 1; every text must end
// with finish_reason "stop" and validate against its schema with ajv (draft
// 2020-12, ajv-formats for date, time, date-time, uuid and ipv4). Regular
// expressions are checked with JavaScript's RegExp, choices by membership.
//
//   node scripts/structured_check.mjs PVLLM REFERENCE_NODE_MODULES OUT.json MODEL...
//
// Prints a table and writes the figures to OUT.json; exits 1 on any failure.
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const [pvllm, modules, outFile, ...models] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats").default;
const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true });
addFormats(ajv, ["date", "time", "date-time", "uuid", "ipv4"]);

const dataDir = path.join(path.dirname(new URL(import.meta.url).pathname), "..", "tests", "data", "structured");
const SAMPLES = 16;

function generate(model, args, temperature, n, seed) {
  const out = execFileSync(pvllm, ["generate", "--model", model, "-q", "--json",
    "--prompt", "Once upon a time", "-t", String(temperature), "-n", String(n),
    "--seed", String(seed), "--max-tokens", "1000", ...args],
    { encoding: "utf8", maxBuffer: 64 << 20 });
  return out.trim().split("\n").map((line) => JSON.parse(line));
}

const constraints = [];
for (const file of readdirSync(dataDir).filter((f) => f.endsWith(".schema.json")).sort()) {
  const schemaPath = path.join(dataDir, file);
  const validate = ajv.compile(JSON.parse(readFileSync(schemaPath, "utf8")));
  constraints.push({
    name: file.replace(".schema.json", ""),
    args: ["--json-schema", schemaPath],
    check: (text) => {
      let doc;
      try { doc = JSON.parse(text); } catch (e) { return `not JSON: ${e.message}`; }
      return validate(doc) ? null : ajv.errorsText(validate.errors);
    },
  });
}
const pattern = "(Tom|Lily|Sue) (is|was) ([a-z]{2,8} ){0,3}[a-z]{2,8}\\.( [A-Z][a-z]{1,6}!)?";
const regex = new RegExp(`^(?:${pattern})$`, "u");
constraints.push({ name: "regex", args: ["--regex", pattern],
  check: (t) => (regex.test(t) ? null : "no match") });
const choices = ["yes", "no", "maybe later", "ça va"];
constraints.push({ name: "choice", args: choices.flatMap((c) => ["--choice", c]),
  check: (t) => (choices.includes(t) ? null : "not a choice") });

const rows = [];
let failures = 0;
for (const model of models) {
  for (const c of constraints) {
    const started = Date.now();
    const samples = [...generate(model, c.args, 0, 1, 0), ...generate(model, c.args, 1, SAMPLES, 7)];
    let valid = 0;
    let stopped = 0;
    for (const s of samples) {
      const problem = s.finish_reason !== "stop" ? `finish_reason ${s.finish_reason}` : c.check(s.text);
      if (s.finish_reason === "stop") stopped += 1;
      if (problem === null) {
        valid += 1;
      } else {
        failures += 1;
        console.error(`FAIL ${path.basename(model)} ${c.name}: ${problem}\n  ${JSON.stringify(s.text)}`);
      }
    }
    rows.push({ model: path.basename(model), constraint: c.name, samples: samples.length, valid,
      stopped, seconds: (Date.now() - started) / 1000 });
  }
}
console.log("| model | constraint | samples | valid | stopped | seconds |");
console.log("|---|---|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(`| ${r.model} | ${r.constraint} | ${r.samples} | ${r.valid} | ${r.stopped} | ${r.seconds.toFixed(1)} |`);
}
writeFileSync(outFile, JSON.stringify({ validator: `ajv ${require("ajv/package.json").version}`, rows }, null, 2));
if (failures > 0) {
  console.error(`structured_check: ${failures} sample(s) failed`);
  process.exit(1);
}
console.log(`structured_check: all ${rows.reduce((a, r) => a + r.samples, 0)} samples valid`);
