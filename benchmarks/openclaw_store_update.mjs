// Time OpenClaw 2026.7.35's own `updateSessionStoreEntry` on a sessions.json (reference numbers for
// benchmarks/bench_store.py). Usage: node openclaw_store_update.mjs STORE_JSON KEY UPDATES
// Needs the openclaw oracle (tools/openclaw-oracle, npm ci done); OPENCLAW_ORACLE_DIR points at it.
import path from "node:path";
import { pathToFileURL } from "node:url";

const oracleDir = process.env.OPENCLAW_ORACLE_DIR || "/tmp/openclaw-oracle";
const oc = await import(pathToFileURL(path.join(oracleDir, "lib", "oc.mjs")).href);
oc.ensureSupportedNode();
oc.isolateEnv("sessionkeeper-bench-");
oc.quietConsole();

const [storePath, sessionKey, updatesArg] = process.argv.slice(2);
const updates = Number(updatesArg || "10");
const store = await oc.loadDist("store-OOVm99jJ.js", ["updateSessionStoreEntry", "loadSessionStore"]);

store.loadSessionStore(storePath); // warm the cache like a running gateway
const times = [];
for (let i = 0; i < updates; i += 1) {
  const t0 = process.hrtime.bigint();
  await store.updateSessionStoreEntry({
    storePath,
    sessionKey,
    skipMaintenance: true,
    update: async () => ({ compactionCount: i + 1, lastInteractionAt: Date.now() }),
  });
  times.push(Number(process.hrtime.bigint() - t0) / 1e6);
}
process.stdout.write(JSON.stringify({ timesMs: times }) + "\n");
