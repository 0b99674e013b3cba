#!/usr/bin/env node
// openclaw_lock_oracle.mjs: run OpenClaw 2026.7.35's own session write-lock code on given inputs.
//
//   OPENCLAW_ORACLE=/tmp/openclaw-oracle node tests/lock/openclaw_lock_oracle.mjs < cases.json
//
// stdin: {"settings": [{config, env}], "inspect": [{payload, role, nowMs, staleMs, respectMaxHold,
//          startTimes: {role: n}}], "lockFile": {"nowMs": n, "maxHoldMs": n}}
// stdout: {"settings": [{timeoutMs, staleMs, maxHoldMs}], "inspect": [{pidAlive, ageMs, staleReasons}],
//          "lockFile": "<the raw lock file OpenClaw wrote, with pid and starttime as placeholders>"}
// Roles map to pids of this run: "live" (a sleeping child), "dead" (an exited, reaped child), "none".
// Used by tests/lock/regen_lock_fixtures.py; never by the test suite directly.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawn, spawnSync } from "node:child_process";
import { pathToFileURL } from "node:url";

const ORACLE = process.env.OPENCLAW_ORACLE || "/tmp/openclaw-oracle";
const oc = await import(pathToFileURL(path.join(ORACLE, "lib", "oc.mjs")).href);
oc.ensureSupportedNode();
oc.isolateEnv("openclaw-lock-oracle-");
oc.quietConsole();

const input = JSON.parse(fs.readFileSync(0, "utf8"));
const lock = await oc.loadDist("session-write-lock-hTSNPB_L.js", [
  "acquireSessionWriteLock",
  "resolveSessionWriteLockOptions",
  "testing",
]);

const out = { settings: [], inspect: [] };
for (const c of input.settings ?? []) {
  const r = lock.resolveSessionWriteLockOptions(c.config, { env: c.env });
  const show = (v) => (v === Number.POSITIVE_INFINITY ? "Infinity" : v);
  out.settings.push({ timeoutMs: show(r.timeoutMs), staleMs: show(r.staleMs), maxHoldMs: show(r.maxHoldMs) });
}

const live = spawn(process.execPath, ["-e", "setTimeout(() => {}, 120000)"], { stdio: "ignore" });
const dead = spawnSync(process.execPath, ["-e", "0"]).pid;
const pids = { live: live.pid, dead };
try {
  for (const c of input.inspect ?? []) {
    const payload = { ...c.payload };
    if (c.role in pids) payload.pid = pids[c.role];
    const starts = c.startTimes ?? {};
    lock.testing.setProcessStartTimeResolverForTest((pid) => {
      for (const [role, value] of Object.entries(starts)) if (pids[role] === pid) return value;
      return null;
    });
    const r = lock.testing.inspectLockPayloadForTest(payload, c.staleMs, c.nowMs, { respectMaxHold: c.respectMaxHold });
    out.inspect.push({ pidAlive: r.pidAlive, ageMs: r.ageMs, staleReasons: r.staleReasons });
  }
  lock.testing.setProcessStartTimeResolverForTest(undefined);

  if (input.lockFile) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "oc-lock-"));
    const file = path.join(dir, "s.jsonl");
    oc.freezeClock(input.lockFile.nowMs);
    const held = await lock.acquireSessionWriteLock({ sessionFile: file, maxHoldMs: input.lockFile.maxHoldMs });
    const raw = fs.readFileSync(`${file}.lock`, "utf8");
    const mode = fs.statSync(`${file}.lock`).mode & 0o777;
    await held.release();
    out.lockFile = raw.replace(`"pid": ${process.pid}`, '"pid": PID').replace(/"starttime": \d+/, '"starttime": START');
    out.lockFileMode = mode;
    out.lockFileRemovedOnRelease = !fs.existsSync(`${file}.lock`);
    fs.rmSync(dir, { recursive: true, force: true });
  }
} finally {
  live.kill("SIGKILL");
}
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
