// Writes tests/data/structured/conditional_goldens.json: random JSON schemas
// built around if / then / else (and the `not` forms that spell "if does not
// hold": types, enum and const values, missing members), each with random
// instances labelled valid or invalid by ajv 8 (draft 2020-12).
// tests/unit/structured_json_conditional_test.cc checks that the grammar
// json_schema.cc writes for each schema accepts exactly the valid ones.
//
// Schemas: an object of members `kind` (a string, sometimes an enum),
// `n` (an integer), `s` (a string), `flag` (a boolean), with one to three
// conditions (in an allOf when more than one), each an "if" of one of the
// forms below (types, values, members, bounds, allOf, anyOf, not) with a
// "then", an "else" or both (some of them a `not` of such a form), and now
// and then a
// condition inside a member's schema or a schema without "type".
// Instances: objects over those names (and an unlisted `z`) with values
// drawn from small pools that hit each condition's edges, a few values of
// the wrong type, and non-objects. Serialized by JSON.stringify (compact,
// as the grammar without whitespace writes them).
//
// Run: node scripts/reference/make_conditional_goldens.mjs "$(bash scripts/reference/install.sh)"
import fs from "node:fs";
import path from "node:path";
import { referencePackages, repoRoot as root } from "./reference_packages.mjs";
import { seededRandom } from "./seeded_random.mjs";

const { require, version } = referencePackages(process.argv[2]);
const Ajv2020 = require("ajv/dist/2020").default;

const rand = seededRandom(20261202);
const pick = (list) => list[Math.floor(rand() * list.length)];
const chance = (p) => rand() < p;

const KINDS = ["a", "b", "c", "z"];
const POOLS = {
  kind: ["a", "b", "c", "z", "", 1, null],
  n: [-1, 0, 3, 7, 12, "3", true],
  s: ["x", "yy", "", 5],
  flag: [true, false, "true", null],
  z: [1, "z"],
};

// One condition: an "if" schema and what it implies.
function ifSchema() {
  switch (Math.floor(rand() * 13)) {
    case 9:
      return { properties: { n: { minimum: pick([0, 3, 7]) } } };
    case 10:
      return { properties: { s: { maxLength: 1 } }, required: ["s"] };
    case 11:
      return { anyOf: [{ required: ["s"] }, { properties: { n: { maximum: 3 } }, required: ["n"] }] };
    case 12:
      return { allOf: [{ properties: { kind: { enum: ["a", "b"] } } }, { minProperties: 2 }] };
    case 0:
      return { properties: { kind: { const: pick(KINDS) } } };
    case 1:
      return { properties: { kind: { const: pick(KINDS) } }, required: ["kind"] };
    case 2:
      return { properties: { kind: { enum: [pick(KINDS), pick(KINDS)] } } };
    case 3:
      return { required: [pick(["s", "n", "flag"])] };
    case 4:
      return { properties: { flag: { const: pick([true, false]) } }, required: ["flag"] };
    case 5:
      return { properties: { n: { type: "integer" }, s: { type: "string" } } };
    case 6:
      return { not: { required: [pick(["s", "n"])] } };
    case 7:
      return { properties: { kind: { type: "string", const: pick(KINDS) } }, required: ["kind"] };
    default:
      return { properties: { s: { enum: ["x", "yy"] } }, required: ["s", "kind"] };
  }
}

function implied() {
  switch (Math.floor(rand() * 9)) {
    case 6:
      return { not: { properties: { n: { exclusiveMaximum: pick([0, 3]) } } } };
    case 7:
      return { not: { anyOf: [{ required: ["n", "s"] }, { properties: { kind: { const: "a" } }, required: ["kind"] }] } };
    case 8:
      return { properties: { n: { not: { minimum: 5 } } } };
    case 0:
      return { required: [pick(["n", "s", "flag"])] };
    case 1:
      return { properties: { n: { minimum: pick([0, 3, 5]) } } };
    case 2:
      return { properties: { s: { maxLength: 1 } } };
    case 3:
      return { properties: { flag: { const: pick([true, false]) } } };
    case 4:
      return { properties: { kind: { enum: ["a", "b"] } } };
    default:
      return { not: { required: [pick(["n", "s", "flag"])] } };
  }
}

function condition() {
  const c = { if: ifSchema() };
  const which = Math.floor(rand() * 3);
  if (which !== 1) c.then = implied();
  if (which !== 0) c.else = implied();
  return c;
}

function schema() {
  const s = {
    type: "object",
    properties: {
      kind: chance(0.5) ? { type: "string" } : { type: "string", enum: ["a", "b", "c"] },
      n: { type: "integer" },
      s: { type: "string" },
      flag: { type: "boolean" },
    },
  };
  if (chance(0.3)) s.additionalProperties = false;
  if (chance(0.3)) s.required = [pick(["kind", "n"])];
  const n = 1 + Math.floor(rand() * 3);
  const conds = Array.from({ length: n }, condition);
  if (n === 1) Object.assign(s, conds[0]);
  else s.allOf = conds;
  if (chance(0.15)) {
    // A condition inside a member's schema: an object member.
    s.properties.sub = { type: "object", properties: { kind: { type: "string" }, n: { type: "integer" } }, ...condition() };
  }
  if (chance(0.1)) delete s.type;  // then non-objects pass every object keyword
  return s;
}

function instance(withSub) {
  if (chance(0.08)) return pick(["a", 3, null, [1], true]);
  const o = {};
  for (const name of ["kind", "n", "s", "flag", "z"]) {
    if (chance(name === "z" ? 0.1 : 0.55)) o[name] = pick(POOLS[name]);
  }
  if (withSub && chance(0.6)) {
    const sub = {};
    for (const name of ["kind", "n", "s", "flag"]) {
      if (chance(0.5)) sub[name] = pick(POOLS[name]);
    }
    o.sub = sub;
  }
  return o;
}

const ajv = new Ajv2020({ strict: false });
const cases = [];
for (let i = 0; i < 150; ++i) {
  const s = schema();
  const validate = ajv.compile(s);
  const seen = new Set();
  const instances = [];
  for (let k = 0; k < 400 && instances.length < 32; ++k) {
    const text = JSON.stringify(instance(Boolean(s.properties.sub)));
    if (seen.has(text)) continue;
    seen.add(text);
    instances.push({ text, valid: validate(JSON.parse(text)) });
  }
  cases.push({ schema: s, instances });
}
const out = {
  source: `ajv ${version("ajv")} (draft 2020-12), scripts/reference/make_conditional_goldens.mjs`,
  cases,
};
const file = path.join(root, "tests/data/structured/conditional_goldens.json");
// One line per schema and per instance.
const lines = [`{"source": ${JSON.stringify(out.source)},`, ` "cases": [`];
cases.forEach((c, i) => {
  lines.push(`  {"schema": ${JSON.stringify(c.schema)},`, `   "instances": [`);
  c.instances.forEach((x, k) =>
    lines.push(`    ${JSON.stringify(x)}${k + 1 < c.instances.length ? "," : ""}`));
  lines.push(`  ]}${i + 1 < cases.length ? "," : ""}`);
});
lines.push(" ]}");
fs.writeFileSync(file, lines.join("\n") + "\n");
const valid = cases.reduce((a, c) => a + c.instances.filter((x) => x.valid).length, 0);
const all = cases.reduce((a, c) => a + c.instances.length, 0);
console.log(`${file}: ${cases.length} schemas, ${all} instances, ${valid} valid`);
