// Print what OpenClaw 2026.7.35's loadSessionStore reads from a sessions.json, after optionally applying
// one updateSessionStoreEntry patch with its own code. Used by tests/store/test_store_oracle_live.py.
// Usage: node openclaw_load_store.mjs STORE_JSON [KEY PATCH_JSON]
import path from "node:path";
import { pathToFileURL } from "node:url";

const oracleDir = process.env.OPENCLAW_ORACLE_DIR || "/tmp/openclaw-oracle";
const oc = await import(pathToFileURL(path.join(oracleDir, "lib", "oc.mjs")).href);
oc.ensureSupportedNode();
oc.isolateEnv("sessionkeeper-store-live-");
oc.quietConsole();
const store = await oc.loadDist("store-OOVm99jJ.js", ["loadSessionStore", "updateSessionStoreEntry"]);

const [storePath, key, patchJson] = process.argv.slice(2);
if (key) {
  const patch = JSON.parse(patchJson);
  await store.updateSessionStoreEntry({ storePath, sessionKey: key, skipMaintenance: true, update: async () => patch });
}
process.stdout.write(JSON.stringify(store.loadSessionStore(storePath, { skipCache: true })) + "\n");
