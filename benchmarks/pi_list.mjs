#!/usr/bin/env node
// pi 0.73.1's SessionManager.list on a directory, for side-by-side checks and timings.
//
// Usage: node pi_list.mjs ORACLE_DIR SESSION_DIR [--repeat N]
// ORACLE_DIR is an installed pi-oracle copy (its node_modules holds @mariozechner/pi-coding-agent).
// Output (stdout), JSON: {"sessions": [{path, id, cwd, name, parentSessionPath, created, modified,
// messageCount}] (dates as ms since the epoch, pi's order), "list_ms": [..], "list_ms_median"}.
// With --repeat N the listing is timed N times after one warm-up.
import path from "node:path";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const [oracle, dir] = args.filter((a) => !a.startsWith("--"));
const ri = args.indexOf("--repeat");
const repeat = ri >= 0 ? Number(args[ri + 1]) : 1;
if (!oracle || !dir || !Number.isInteger(repeat) || repeat < 1) {
	process.stderr.write("usage: node pi_list.mjs ORACLE_DIR SESSION_DIR [--repeat N]\n");
	process.exit(2);
}
const entry = path.join(oracle, "node_modules/@mariozechner/pi-coding-agent/dist/index.js");
const { SessionManager } = await import(pathToFileURL(entry).href);
const times = [];
let sessions = await SessionManager.list(dir, dir);
for (let round = 0; round < repeat; round++) {
	const t0 = process.hrtime.bigint();
	sessions = await SessionManager.list(dir, dir);
	times.push(Number(process.hrtime.bigint() - t0) / 1e6);
}
const median = [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)];
process.stdout.write(JSON.stringify({
	sessions: sessions.map((s) => ({
		path: s.path, id: s.id, cwd: s.cwd, name: s.name ?? null,
		parentSessionPath: s.parentSessionPath ?? null,
		created: s.created.getTime(), modified: s.modified.getTime(), messageCount: s.messageCount,
	})),
	list_ms: times, list_ms_median: median,
}));
