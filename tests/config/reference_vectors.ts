// Computes the expected values kept in tests/config/test_reference_vectors.py by running the
// TypeScript adapter's own modules (pi-mcp-adapter 2.36.0 from npm). Not part of the test run.
//
//   mkdir /tmp/ref && cd /tmp/ref && npm pack pi-mcp-adapter@2.36.0 && tar xzf *.tgz
//   (cd package && <drop devDependencies and peerDependencies from package.json> \
//      && npm install --ignore-scripts)
//   npm install tsx@4
//   mkdir -p /tmp/ref-home
//   HOME=/tmp/ref-home PI_CODING_AGENT_DIR=/tmp/ref-home/.pi/agent REF=/tmp/ref/package \
//     npx tsx <this file> > vectors.json
//
// The merge cases write files under that HOME (the reference reads them from there).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

async function main(): Promise<void> {
  const REF = process.env.REF!;
  const { computeServerHash, isServerCacheValid } = await import(`${REF}/metadata-cache.ts`);
  const { interpolateEnvVars, getMissingEnvVars } = await import(`${REF}/utils.ts`);
  const { formatToolName } = await import(`${REF}/types.ts`);

  const out: Record<string, unknown> = {};

  const hashCases: Array<[string, Record<string, unknown>, Record<string, string>]> = [
    ["npx-plain", { command: "npx", args: ["-y", "x"] }, {}],
    ["command-and-args-hashed-as-written", { command: "~/bin/s", args: ["${ROOT}/x", "~/y"] }, { ROOT: "/r" }],
    ["env-variables-tilde-and-commands", { command: "x", env: { A: "~/p", B: "${TOK}", C: "!op read x", D: "!!lit${TOK}" } }, { TOK: "t" }],
    ["url-and-header-spellings", { url: "https://h.example/${P}", headers: { Authorization: "Bearer ${env:T}", X: "{env:T}", Y: "$env:T" } }, { P: "mcp", T: "s" }],
    ["bearer-token-env", { url: "https://h.example/mcp", auth: "bearer", bearerTokenEnv: "TOK" }, { TOK: "abc" }],
    ["bearer-token-variable", { url: "https://h.example/mcp", bearerToken: "${TOK}" }, { TOK: "abc" }],
    ["env-keys-beyond-the-bmp", { command: "x", env: { "\u{1F600}": "a", "\uFF01": "b", a: "c" } }, {}],
    ["socket-with-tilde", { socket: "~/s.sock" }, {}],
    ["cwd-filters-resources", { command: "x", cwd: "~/w", includeTools: ["a*"], excludeTools: ["b"], exposeResources: false }, {}],
    ["request-headers-command", { url: "https://h.example/mcp", requestHeadersCommand: { command: "${BIN}/sign", args: ["--a", "$env:X"], env: { K: "${X}" }, timeoutMs: 5000 } }, { BIN: "/b", X: "x" }],
    ["protocol-version-auth-false", { url: "https://h.example/mcp", protocolVersion: "auto", auth: false }, {}],
    ["lifecycle-not-hashed", { command: "x", lifecycle: "keep-alive", idleTimeout: 3, toolPrefix: "short" }, {}],
  ];
  out.hash = hashCases.map(([id, entry, env]) => ({ id, entry, env, hash: computeServerHash(entry, env) }));

  const NOW = 1_800_000_000_000;
  Date.now = () => NOW;
  const DAY = 86_400_000;
  const def = { command: "x" };
  const configHash = computeServerHash(def, {});
  const acceptance: Array<[string, Record<string, unknown>]> = [
    ["fresh", { cachedAt: NOW - 1000 }],
    ["slightly-in-the-future", { cachedAt: NOW + 30_000 }],
    ["a-day-in-the-future", { cachedAt: NOW + DAY }],
    ["cached-at-zero", { cachedAt: 0 }],
    ["cached-at-string", { cachedAt: String(NOW) }],
    ["cached-at-missing", {}],
    ["exactly-seven-days", { cachedAt: NOW - 7 * DAY }],
    ["seven-days-and-a-millisecond", { cachedAt: NOW - 7 * DAY - 1 }],
    ["ttl-zero", { cachedAt: NOW, ttlMs: 0 }],
    ["ttl-negative", { cachedAt: NOW - 5000, ttlMs: -5 }],
    ["ttl-fractional", { cachedAt: NOW - 5000, ttlMs: 1.5 }],
    ["ttl-string", { cachedAt: NOW - 5000, ttlMs: "1000" }],
    ["within-ttl", { cachedAt: NOW - 999, ttlMs: 1000 }],
    ["at-ttl", { cachedAt: NOW - 1000, ttlMs: 1000 }],
    ["past-ttl", { cachedAt: NOW - 1001, ttlMs: 1000 }],
    ["ttl-beyond-seven-days", { cachedAt: NOW - 8 * DAY, ttlMs: 30 * DAY }],
    ["ttl-unsafe-integer", { cachedAt: NOW - 8 * DAY, ttlMs: 2 ** 60 }],
    ["negative-ttl-seven-days-old", { cachedAt: NOW - 7 * DAY - 1, ttlMs: -1 }],
  ];
  out.now = NOW;
  out.acceptance = acceptance.map(([id, fields]) => ({
    id, fields, valid: isServerCacheValid({ configHash, tools: [], resources: [], ...fields }, def, undefined, {}),
  }));

  const env = { A: "one", B: "two" };
  const interpolation = [
    "${A}", "$env:A", "{env:A}", "${env:A}", "x${A}y$env:B", "${MISSING}z", "$A", "${1A}", "${A-B}",
    "{env:A}{env:B}", "$${A}", "${A}${B}", "pre{env:MISSING}post",
  ];
  out.interpolation = interpolation.map((value) => ({
    value, result: interpolateEnvVars(value, env), missing: getMissingEnvVars(value, env),
  }));

  const names: Array<[string, string, string]> = [
    ["search", "github", "server"], ["search", "github", "short"], ["search", "github", "none"],
    ["search", "github", "mcp"], ["search", "chrome-devtools", "mcp"], ["search", "chrome-devtools", "server"],
    ["take.screenshot", "chrome-devtools", "server"], ["github_search", "github", "server"],
    ["mcp__github_search", "github", "mcp"], ["read", "fs-mcp", "short"], ["read", "mcp", "short"],
    ["read", "my server", "server"], ["read", "my server", "mcp"], ["read", "a.b", "short"],
  ];
  out.naming = names.map(([tool, server, mode]) => ({ tool, server, mode, name: formatToolName(tool, server, mode) }));

  // Merge and import rules: the whole loader over files in a temporary home.
  const { loadMcpConfig } = await import(`${REF}/config.ts`);
  const home = process.env.HOME!;
  const agentDir = process.env.PI_CODING_AGENT_DIR!;
  type Layers = { agent?: unknown; project?: unknown; cursor?: unknown; claude?: unknown };
  const mergeCases: Array<[string, Layers]> = [
    ["one-field-override", { agent: { mcpServers: { s: { command: "x", args: ["a"], lifecycle: "lazy" } } }, project: { mcpServers: { s: { lifecycle: "keep-alive" } } } }],
    ["env-replaced-whole", { agent: { mcpServers: { s: { command: "x", env: { A: "1", B: "2" } } } }, project: { mcpServers: { s: { env: { C: "3" } } } } }],
    ["new-url-keeps-auth-and-oauth-false", { agent: { mcpServers: { s: { url: "https://one.example/mcp", auth: "bearer", bearerToken: "t", headers: { H: "1" }, oauth: false, caFile: "/ca.pem", requestHeadersCommand: { command: "sign" } } } }, project: { mcpServers: { s: { url: "https://two.example/mcp" } } } }],
    ["new-url-drops-oauth-object", { agent: { mcpServers: { s: { url: "https://one.example/mcp", auth: "oauth", oauth: { clientId: "c" } } } }, project: { mcpServers: { s: { url: "https://two.example/mcp" } } } }],
    ["same-url-keeps-credentials", { agent: { mcpServers: { s: { url: "https://one.example/mcp", bearerToken: "t", headers: { H: "1" } } } }, project: { mcpServers: { s: { url: "https://one.example/mcp", idleTimeout: 3 } } } }],
    ["url-to-command-drops-http-transport", { agent: { mcpServers: { s: { url: "https://one.example/mcp", httpTransport: "sse", auth: "bearer", headers: { H: "1" } } } }, project: { mcpServers: { s: { command: "local" } } } }],
    ["command-to-url-drops-stdio", { agent: { mcpServers: { s: { command: "x", args: ["a"], env: { A: "1" }, cwd: "/w", lifecycle: "eager" } } }, project: { mcpServers: { s: { url: "https://two.example/mcp" } } } }],
    ["socket-replaces-everything", { agent: { mcpServers: { s: { url: "https://one.example/mcp", headers: { H: "1" }, lifecycle: "eager" } } }, project: { mcpServers: { s: { socket: "/run/s.sock" } } } }],
    ["imported-server-overridden-field-by-field", { cursor: { mcpServers: { c: { command: "cursor-c", args: ["x"] } } }, agent: { imports: ["cursor"], mcpServers: { c: { lifecycle: "keep-alive" } } } }],
    ["imported-server-disabled-by-project", { cursor: { mcpServers: { c: { command: "cursor-c" } } }, agent: { imports: ["cursor"] }, project: { mcpServers: { c: { disabled: true } } } }],
    ["first-import-wins-a-name", { cursor: { mcpServers: { b: { command: "cursor-b" } } }, claude: { mcpServers: { b: { command: "claude-b" } } }, agent: { imports: ["cursor", "claude-code"] } }],
    ["higher-layer-import-overrides-lower", { cursor: { mcpServers: { b: { command: "cursor-b" } } }, claude: { mcpServers: { b: { command: "claude-b" } } }, agent: { imports: ["cursor"] }, project: { imports: ["claude-code"] } }],
    ["both-server-maps-reads-mcpServers", { agent: { mcpServers: { a: { command: "a" } }, "mcp-servers": { b: { command: "b" } } } }],
    ["kebab-server-map", { agent: { "mcp-servers": { k: { command: "k" } } } }],
    ["disabled-string-is-kept", { agent: { mcpServers: { d: { command: "d", disabled: "true" } } } }],
  ];
  const results: unknown[] = [];
  for (const [id, layers] of mergeCases) {
    const project = mkdtempSync(join(tmpdir(), "ref-project-"));
    rmSync(join(home, ".cursor"), { recursive: true, force: true });
    rmSync(join(home, ".claude"), { recursive: true, force: true });
    rmSync(join(agentDir, "mcp.json"), { force: true });
    mkdirSync(agentDir, { recursive: true });
    if (layers.agent) writeFileSync(join(agentDir, "mcp.json"), JSON.stringify(layers.agent));
    if (layers.project) {
      mkdirSync(join(project, ".pi"), { recursive: true });
      writeFileSync(join(project, ".pi", "mcp.json"), JSON.stringify(layers.project));
    }
    if (layers.cursor) {
      mkdirSync(join(home, ".cursor"), { recursive: true });
      writeFileSync(join(home, ".cursor", "mcp.json"), JSON.stringify(layers.cursor));
    }
    if (layers.claude) {
      mkdirSync(join(home, ".claude"), { recursive: true });
      writeFileSync(join(home, ".claude", "mcp.json"), JSON.stringify(layers.claude));
    }
    const config = loadMcpConfig(undefined, project);
    results.push({ id, layers, servers: config.mcpServers });
    rmSync(project, { recursive: true, force: true });
  }
  out.merge = results;
  console.log(JSON.stringify(out, null, 1));
}

void main();
