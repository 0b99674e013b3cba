#!/usr/bin/env node
// fork_oracle.mjs: run OpenClaw 2026.7.35's parent-fork sizing and transcript fork on crafted cases.
//
//   node tests/store/fork_oracle.mjs ORACLE_DIR CASES.json > RESULTS.json
//
// ORACLE_DIR is an installed copy of shared/tools/openclaw-oracle. CASES.json: [{name, entry, transcript}]
// where entry is the parent SessionEntry and transcript the parent's JSONL text (or null: no file). Each
// case gets its own sessions dir; the transcript is written as <sessionId>.jsonl. Prints, per case:
// {name, tokens (resolveParentForkTokenCountRuntime), decision (resolveParentForkDecision: status,
// parentTokens, maxTokens), fork: the lines after the header of the transcript forkSessionFromParentTranscript
// writes (label/leaf entries reduced to {type, parentIsLast, targetId, label}), or null when it fails}.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [oracleDir, casesFile] = process.argv.slice(2);
const oc = await import(pathToFileURL(path.join(path.resolve(oracleDir), "lib", "oc.mjs")).href);
oc.ensureSupportedNode();
oc.isolateEnv("openclaw-oracle-fork-");
oc.quietConsole();

const { resolveParentForkTokenCountRuntime } = await oc.loadDist("session-fork.runtime-ut5SId_V.js", [
  "resolveParentForkTokenCountRuntime",
]);
const { resolveParentForkDecision } = await oc.loadDist("session-fork-X2UgE0rJ.js", ["resolveParentForkDecision"]);
const { forkSessionFromParentTranscript } = await oc.loadDist("session-accessor-ZRcpGzx8.js", [
  "forkSessionFromParentTranscript",
]);

const cases = JSON.parse(fs.readFileSync(casesFile, "utf8"));
const out = [];
for (const c of cases) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "fork-case-"));
  const sessions = path.join(root, "agents", "main", "sessions");
  fs.mkdirSync(sessions, { recursive: true });
  const storePath = path.join(sessions, "sessions.json");
  fs.writeFileSync(storePath, JSON.stringify({ "agent:main:parent": c.entry }));
  if (c.transcript !== null) fs.writeFileSync(path.join(sessions, `${c.entry.sessionId}.jsonl`), c.transcript);
  const tokens = await resolveParentForkTokenCountRuntime({ parentEntry: c.entry, storePath });
  const decision = await resolveParentForkDecision({ parentEntry: c.entry, agentId: "main", storePath });
  let fork = null;
  if (c.transcript !== null) {
    const result = await forkSessionFromParentTranscript({
      agentId: "main",
      parentEntry: c.entry,
      parentSessionKey: "agent:main:parent",
      sessionKey: "agent:main:child",
      storePath,
    });
    if (result.status === "created") {
      const lines = fs.readFileSync(result.transcript.sessionFile, "utf8").split("\n").filter((l) => l.trim());
      const header = JSON.parse(lines[0]);
      let last = null;
      fork = {
        headerKeys: Object.keys(header),
        cwd: header.cwd,
        parentSessionIsSource: header.parentSession === path.join(sessions, `${c.entry.sessionId}.jsonl`),
        entries: lines.slice(1).map((line) => {
          const e = JSON.parse(line);
          const reduced = e.type === "label" || e.type === "leaf"
            ? { type: e.type, parentIsLast: e.parentId === last, targetId: e.targetId, label: e.label }
            : { line };
          last = e.id;
          return reduced;
        }),
      };
    }
  }
  out.push({
    name: c.name,
    tokens: tokens ?? null,
    decision: { status: decision.status, parentTokens: decision.parentTokens ?? null, maxTokens: decision.maxTokens },
    fork,
  });
  fs.rmSync(root, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
