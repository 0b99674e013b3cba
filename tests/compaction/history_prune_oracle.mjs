#!/usr/bin/env node
// history_prune_oracle.mjs: run OpenClaw 2026.7.35's pruneHistoryForContextShare on message lists.
//
//   node tests/compaction/history_prune_oracle.mjs ORACLE_DIR CASES.json > RESULTS.json
//
// ORACLE_DIR is an installed copy of shared/tools/openclaw-oracle (its lib/oc.mjs loads the dist chunks by
// source name). pruneHistoryForContextShare is not exported; buildHistoryPrunePlan (exported) calls it when
// the new content exceeds the history budget, so each case passes tokensBefore = 10^9. CASES.json:
// [{name, messages, contextWindow, maxHistoryShare, parts?, nowMs?}]. Date.now() (the synthetic results'
// timestamp) is frozen at nowMs (default 1800000000000). Prints [{name, kept, dropped, droppedChunks,
// droppedMessages, droppedTokens, keptTokens, budgetTokens}].
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [oracleDir, casesFile] = process.argv.slice(2);
const oc = await import(pathToFileURL(path.join(path.resolve(oracleDir), "lib", "oc.mjs")).href);
oc.ensureSupportedNode();
oc.isolateEnv("openclaw-oracle-history-prune-");
oc.quietConsole();

const { buildHistoryPrunePlan } = await oc.loadDist("compaction-planning-CneurfML.js", ["buildHistoryPrunePlan"]);

const cases = JSON.parse(fs.readFileSync(casesFile, "utf8"));
const out = [];
for (const c of cases) {
  oc.freezeClock(c.nowMs ?? 1800000000000);
  const plan = buildHistoryPrunePlan({
    messagesToSummarize: c.messages,
    turnPrefixMessages: [],
    tokensBefore: 1e9,
    contextWindowTokens: c.contextWindow,
    maxHistoryShare: c.maxHistoryShare,
    parts: c.parts,
  });
  const p = plan.pruned;
  out.push({
    name: c.name,
    kept: p.messages,
    dropped: p.droppedMessagesList,
    droppedChunks: p.droppedChunks,
    droppedMessages: p.droppedMessages,
    droppedTokens: p.droppedTokens,
    keptTokens: p.keptTokens,
    budgetTokens: p.budgetTokens,
  });
}
process.stdout.write(JSON.stringify(out));
