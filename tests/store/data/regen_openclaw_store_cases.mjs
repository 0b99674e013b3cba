// Regenerate tests/store/data/openclaw_store_cases.json with OpenClaw 2026.7.35's own code:
// mergeSessionEntry / mergeSessionEntryPreserveActivity (spec §1.3) and loadSessionStore's load-time
// normalisation (§1.1, §1.4). Run: node tests/store/data/regen_openclaw_store_cases.mjs
// [OUTPUT.json] (needs the openclaw oracle with npm ci done; OPENCLAW_ORACLE_DIR, default /tmp/openclaw-oracle).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const oracleDir = process.env.OPENCLAW_ORACLE_DIR || "/tmp/openclaw-oracle";
const oc = await import(pathToFileURL(path.join(oracleDir, "lib", "oc.mjs")).href);
oc.ensureSupportedNode();
const env = oc.isolateEnv("sessionkeeper-store-cases-");
oc.quietConsole();
const NOW = 1790000000000;
oc.freezeClock(NOW);

const types = await oc.loadDist("types-CoDcFuoc.js", ["mergeSessionEntry", "mergeSessionEntryPreserveActivity"]);
const store = await oc.loadDist("store-OOVm99jJ.js", ["loadSessionStore"]);

const E = (extra) => ({ sessionId: "old", updatedAt: NOW - 5000, sessionStartedAt: NOW - 9000, ...extra });
const mergeInputs = [
  ["new entry", null, { sessionId: "n1", label: "x" }],
  ["new entry keeps patch sessionStartedAt", null, { sessionId: "n1", sessionStartedAt: 5 }],
  ["new entry clamps future updatedAt", null, { sessionId: "n1", updatedAt: NOW + 99 }],
  ["same id keeps sessionStartedAt", E({}), { label: "y" }],
  ["same id without sessionStartedAt", { sessionId: "old", updatedAt: 1 }, { label: "y" }],
  ["null sessionId in patch falls back", E({}), { sessionId: null, label: "y" }],
  ["id change resets sessionStartedAt", E({}), { sessionId: "new" }],
  ["id change keeps patch sessionStartedAt", E({}), { sessionId: "new", sessionStartedAt: 7 }],
  ["id change rewrites plain file", E({ sessionFile: "/s/old.jsonl" }), { sessionId: "new" }],
  ["id change rewrites topic file", E({ sessionFile: "/s/old-topic-12%2F3.jsonl" }), { sessionId: "new" }],
  ["id change rewrites fork file", E({ sessionFile: "/s/2026-09-20T14-13-48-902Z_old.jsonl" }), { sessionId: "new" }],
  ["id change keeps other file", E({ sessionFile: "/s/other.jsonl" }), { sessionId: "new" }],
  ["id change relative file", E({ sessionFile: "./a//old.jsonl" }), { sessionId: "new" }],
  ["id change bare file", E({ sessionFile: "old.jsonl" }), { sessionId: "new" }],
  ["id change patch file", E({ sessionFile: "/s/old.jsonl" }), { sessionId: "new", sessionFile: "/t/old.jsonl" }],
  ["id change non-jsonl file", E({ sessionFile: "/s/old.txt" }), { sessionId: "new" }],
  ["future existing updatedAt", E({ updatedAt: NOW + 50000 }), { label: "z" }],
  ["negative patch updatedAt", E({}), { updatedAt: -4 }],
  ["string patch updatedAt", E({}), { updatedAt: "soon" }],
  ["model change drops provider", E({ model: "a", modelProvider: "p" }), { model: "b" }],
  ["same model keeps provider", E({ model: "a", modelProvider: "p" }), { model: "a" }],
  ["padded same model keeps provider", E({ model: "a", modelProvider: "p" }), { model: " a " }],
  ["model and provider together", E({ model: "a", modelProvider: "p" }), { model: "b", modelProvider: " q " }],
  ["blank model removes both", E({ model: "a", modelProvider: "p" }), { model: "  " }],
  ["null model removes both", E({ model: "a", modelProvider: "p" }), { model: null }],
  ["blank provider removed", E({ model: "a", modelProvider: "p" }), { modelProvider: "" }],
  ["provider without model removed", E({ modelProvider: "p" }), { label: "x" }],
  ["unknown fields pass through", E({ future: { a: 1 } }), { otherFuture: [1, null], label: "l" }],
  ["typed value over mistyped", E({ compactionCount: "bad" }), { compactionCount: 2 }],
];
const merges = [];
for (const [name, existing, patch] of mergeInputs) {
  for (const policy of ["default", "preserve-activity"]) {
    const fn = policy === "default" ? types.mergeSessionEntry : types.mergeSessionEntryPreserveActivity;
    const result = fn(existing === null ? undefined : structuredClone(existing), structuredClone(patch));
    merges.push({ name, policy, existing, patch, nowMs: NOW, result: JSON.parse(JSON.stringify(result)) });
  }
}
merges.push(...[
  ["preserve: existing without updatedAt takes patch", { sessionId: "s" }, { updatedAt: 42 }],
  ["preserve: existing without updatedAt, no patch value", { sessionId: "s" }, { label: "x" }],
].map(([name, existing, patch]) => ({
  name, policy: "preserve-activity", existing, patch, nowMs: NOW,
  result: JSON.parse(JSON.stringify(types.mergeSessionEntryPreserveActivity(structuredClone(existing), structuredClone(patch)))),
})));

const rows = {
  "ok": { sessionId: "83d0060e-33c7-40bc-9587-56bcb0b97954", updatedAt: 1, label: "ok", future: { x: [1] } },
  "unsafe dotdot": { sessionId: "../escape", updatedAt: 1 },
  "unsafe slash": { sessionId: "a/b", updatedAt: 1 },
  "unsafe backslash": { sessionId: "a\\b", updatedAt: 1 },
  "null id": { sessionId: null, updatedAt: 1 },
  "numeric id": { sessionId: 5, updatedAt: 1 },
  "empty id": { sessionId: "", updatedAt: 1 },
  "padded id": { sessionId: " padded ", updatedAt: 1 },
  "colon id without file": { sessionId: "a:b@c", updatedAt: 1 },
  "colon id with file": { sessionId: "a:b@c", sessionFile: "x.jsonl", updatedAt: 1 },
  "long id": { sessionId: "x".repeat(200), updatedAt: 1 },
  "too long id": { sessionId: "x".repeat(256), updatedAt: 1 },
  "checkpoint id": { sessionId: "s.checkpoint.12345678-1234-4234-8234-123456789012", updatedAt: 1 },
  "no id": { updatedAt: 1, label: "no id" },
  "string updatedAt": { sessionId: "s1", updatedAt: "x" },
  "negative updatedAt": { sessionId: "s2", updatedAt: -1 },
  "null updatedAt": { sessionId: "s3", updatedAt: null },
  "no updatedAt": { sessionId: "s4" },
  "numeric sessionFile": { sessionId: "s5", sessionFile: 3 },
  "modelProvider only": { sessionId: "s6", modelProvider: "p" },
  "padded model": { sessionId: "s7", model: " m ", modelProvider: " p " },
  "blank provider": { sessionId: "s8", model: "m", modelProvider: "" },
  "skills cache": { sessionId: "s9", skillsSnapshot: { prompt: "p", resolvedSkills: [1] } },
  "legacy room kept groupChannel": { sessionId: "s10", groupChannel: "#g", room: "#r" },
  "array row": [1, 2],
  "string row": "text",
  "null row": null,
};
const storePath = path.join(env.root, "sessions.json");
fs.writeFileSync(storePath, JSON.stringify(rows, null, 2));
const loaded = store.loadSessionStore(storePath, { skipCache: true });

const out = {
  about: "OpenClaw 2026.7.35 outputs for tests/store/test_store_openclaw_cases.py; regenerate with regen_openclaw_store_cases.mjs",
  openclaw: oc.OPENCLAW_VERSION,
  merges,
  load: { rows, result: JSON.parse(JSON.stringify(loaded)) },
};
const here = path.dirname(fileURLToPath(import.meta.url));
const target = process.argv[2] || path.join(here, "openclaw_store_cases.json");
fs.writeFileSync(target, JSON.stringify(out, null, 2) + "\n");
process.stderr.write(`wrote ${merges.length} merge cases and ${Object.keys(rows).length} load rows\n`);
