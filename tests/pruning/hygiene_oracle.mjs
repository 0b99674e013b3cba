#!/usr/bin/env node
// hygiene_oracle.mjs: run OpenClaw 2026.7.35's transcript-hygiene steps on message lists.
//
//   node tests/pruning/hygiene_oracle.mjs ORACLE_DIR CASES.json > RESULTS.json
//
// ORACLE_DIR is an installed copy of shared/tools/openclaw-oracle (its lib/oc.mjs loads the dist chunks
// by source name). CASES.json: [{name, step, messages, options?}], step one of: pairing, toolInputs,
// toolIds, anthropicTurns, geminiTurns, googleOrdering, interSession, contentBlocks,
// normalize, dropThinking, pipeline (sanitizeSessionHistory + validateReplayTurns; options {api, provider,
// modelId}), policy (resolveTranscriptPolicy for options {api, provider, modelId}; prints {name, policy}). Date.now() is frozen at options.nowMs (default
// 1800000000000) so synthetic messages are deterministic. Prints [{name, messages}].
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [oracleDir, casesFile] = process.argv.slice(2);
const oc = await import(pathToFileURL(path.join(path.resolve(oracleDir), "lib", "oc.mjs")).href);
oc.ensureSupportedNode();
oc.isolateEnv("openclaw-oracle-hygiene-");
oc.quietConsole();

const repair = await oc.loadDist("session-transcript-repair-BUFGXxrq.js", [
  "repairToolUseResultPairing",
  "sanitizeToolCallInputs",
]);
const ids = await oc.loadDist("tool-call-id-CtDzcfGi.js", ["sanitizeToolCallIdsForCloudCodeAssist"]);
const turns = await oc.loadDist("embedded-agent-helpers-D4KtJ9qQ.js", [
  "validateAnthropicTurns",
  "validateGeminiTurns",
  "sanitizeGoogleTurnOrdering",
]);

const prov = await oc.loadDist("input-provenance-BkJA7lbx.js", [
  "annotateInterSessionPromptText",
  "normalizeInputProvenance",
]);

const images = await oc.loadDist("embedded-agent-helpers-D4KtJ9qQ.js", ["sanitizeSessionMessagesImages"]);

const { resolveTranscriptPolicy } = await oc.loadDist("tool-result-middleware-CQMhCz6H.js", ["resolveTranscriptPolicy"]);
const replay = await oc.loadDist("attempt.model-diagnostic-events-SpxlOxWw.js", [
  "sanitizeSessionHistory",
  "validateReplayTurns",
  "normalizeAssistantReplayContent",
  "dropThinkingBlocks",
]);

const cases = JSON.parse(fs.readFileSync(casesFile, "utf8"));
const out = [];
for (const c of cases) {
  const options = c.options ?? {};
  oc.freezeClock(options.nowMs ?? 1800000000000);
  if (c.step === "policy") {
    const { api, provider, modelId } = options;
    out.push({ name: c.name, policy: resolveTranscriptPolicy({ modelApi: api, provider, modelId }) });
    continue;
  }
  const input = structuredClone(c.messages);
  let messages;
  switch (c.step) {
    case "pairing":
      messages = repair.repairToolUseResultPairing(input, options).messages;
      break;
    case "toolInputs":
      messages = repair.sanitizeToolCallInputs(input, options);
      break;
    case "toolIds":
      messages = ids.sanitizeToolCallIdsForCloudCodeAssist(input, options.mode ?? "strict", options);
      break;
    case "anthropicTurns":
      messages = turns.validateAnthropicTurns(input);
      break;
    case "geminiTurns":
      messages = turns.validateGeminiTurns(input);
      break;
    case "googleOrdering":
      messages = turns.sanitizeGoogleTurnOrdering(input);
      break;
    case "contentBlocks":
      messages = await images.sanitizeSessionMessagesImages(input, "oracle", options);
      break;
    case "normalize":
      messages = replay.normalizeAssistantReplayContent(input);
      break;
    case "dropThinking":
      messages = replay.dropThinkingBlocks(input);
      break;
    case "pipeline": {
      const sessionManager = { getEntries: () => [], appendCustomEntry: () => {} };
      const params = { modelApi: options.api, provider: options.provider, modelId: options.modelId };
      const sanitized = await replay.sanitizeSessionHistory({ ...params, messages: input, sessionManager, sessionId: "s" });
      messages = await replay.validateReplayTurns({ ...params, messages: sanitized });
      break;
    }
    case "interSession":
      // annotateInterSessionUserMessages is not exported: apply its string-content rule per user message.
      messages = input.map((m) =>
        m.role === "user" && typeof m.content === "string" && prov.normalizeInputProvenance(m.provenance)?.kind === "inter_session"
          ? { ...m, content: prov.annotateInterSessionPromptText(m.content, prov.normalizeInputProvenance(m.provenance)) }
          : m,
      );
      break;
    default:
      throw new Error(`unknown step ${c.step}`);
  }
  out.push({ name: c.name, messages });
}
process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));
