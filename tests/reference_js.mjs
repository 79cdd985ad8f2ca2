// Runs functions of the TypeScript reference (pi-mcp-adapter 2.36, its compiled dist/) so that
// tests can compare its answers with ours on the same inputs. Driven by tests/conftest.py
// (the `reference_js` fixture); not a test itself.
//
// stdin: {"ref": "<package dir>", "module": "npx-resolver", "function": "parseNpxArgs",
//         "calls": [[arg, ...], ...]}
// stdout: one JSON array with, per call, {"value": ...} or {"error": "<message>"}.
//
// A function the module does not export (a parser kept private there) is reached through a
// copy of the module, written next to it for the run so that its own imports still resolve,
// that exports it too.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const request = JSON.parse(readFileSync(0, "utf8"));
const dist = join(request.ref, "dist");
const modulePath = join(dist, `${request.module}.js`);

let probePath;
let mod = await import(pathToFileURL(modulePath).href);
if (typeof mod[request.function] !== "function") {
  probePath = join(dist, `.probe-${process.pid}-${request.module}.js`);
  writeFileSync(probePath, `${readFileSync(modulePath, "utf8")}\nexport { ${request.function} };\n`);
  try {
    mod = await import(pathToFileURL(probePath).href);
  } finally {
    rmSync(probePath, { force: true });
  }
}

const fn = mod[request.function];
const results = [];
const warnings = [];
console.warn = (...args) => warnings.push(args.map(String).join(" "));
for (const args of request.calls) {
  warnings.length = 0;
  try {
    const value = await fn(...args);
    results.push({ value: value === undefined ? null : value, warnings: [...warnings] });
  } catch (error) {
    results.push({ error: error instanceof Error ? error.message : String(error), warnings: [...warnings] });
  }
}
process.stdout.write(JSON.stringify(results));
