#!/usr/bin/env node
// openclaw_hold_lock.mjs: take a transcript's write lock with OpenClaw 2026.7.35's own code.
//
//   OPENCLAW_ORACLE=/tmp/openclaw-oracle node tests/lock/openclaw_hold_lock.mjs FILE TIMEOUT_MS HOLD_MS
//
// Prints {"acquired": true, "pid": ...} once it holds the lock (or {"acquired": false, "code": ...}),
// holds it HOLD_MS ms, releases it and prints {"released": true}. Used by test_lock_oracle_live.py.

import path from "node:path";
import { pathToFileURL } from "node:url";

const ORACLE = process.env.OPENCLAW_ORACLE || "/tmp/openclaw-oracle";
const oc = await import(pathToFileURL(path.join(ORACLE, "lib", "oc.mjs")).href);
oc.ensureSupportedNode();
oc.isolateEnv("openclaw-hold-lock-");
const lock = await oc.loadDist("session-write-lock-hTSNPB_L.js", ["acquireSessionWriteLock"]);
const [file, timeout, holdMs] = process.argv.slice(2);
try {
  const held = await lock.acquireSessionWriteLock({ sessionFile: file, timeoutMs: Number(timeout) });
  console.log(JSON.stringify({ acquired: true, pid: process.pid }));
  await new Promise((resolve) => setTimeout(resolve, Number(holdMs || 0)));
  await held.release();
  console.log(JSON.stringify({ released: true }));
} catch (err) {
  console.log(JSON.stringify({ acquired: false, code: err.code ?? null, message: String(err.message) }));
}
