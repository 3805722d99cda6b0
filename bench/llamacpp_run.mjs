// Runs a GGUF file on llama.cpp's CPU library (node-llama-cpp 3.21.1) and prints one JSON line:
// the greedy ids after a prompt of token ids, the time to the first token (the prefill) and the
// decode steps after it. Used by bench/llm_compare.py beside `ipex-tool bench --llm`.
//
// Usage: node llamacpp_run.mjs MODEL.gguf --prompt-ids 1,2,3 [--new-tokens 32] [--threads 2]
//        [--context 2048] [--score-ids 4,5,6]
// With --score-ids: no timing; the prompt and then those ids are evaluated and the line holds
// "log_probs", llama.cpp's log-softmax over the vocabulary at the last prompt position and after
// each scored id but the last (temperature 1, no top-k/top-p/min-p truncation), one array per
// position (tokens it gives no probability to: null), and "argmax", its most likely token there.
import { getLlama } from "node-llama-cpp";

function option(name, fallback) {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : fallback;
}

const modelPath = process.argv[2];
const prompt = option("--prompt-ids", "1").split(",").map(Number);
const newTokens = Number(option("--new-tokens", "32"));
const threads = Number(option("--threads", "2"));
const contextSize = Number(option("--context", String(Math.max(512, prompt.length + newTokens + 8))));

const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const loadStart = performance.now();
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const loadMs = performance.now() - loadStart;
const context = await model.createContext({ contextSize, threads, batchSize: Math.max(512, prompt.length) });
const sequence = context.getSequence();

const scoreIds = option("--score-ids", "");
if (scoreIds) {
    const scored = scoreIds.split(",").map(Number);
    const next = { generateNext: { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } };
    const input = prompt.slice(0, -1).map((t) => t);
    input.push([prompt[prompt.length - 1], next]);
    for (const t of scored.slice(0, -1)) input.push([t, next]);
    const results = await sequence.controlledEvaluate(input);
    const logProbs = [];
    const argmax = [];
    for (let i = prompt.length - 1; i < input.length; ++i) {
        const probabilities = results[i].next.probabilities;
        let size = 0;
        for (const token of probabilities.keys()) size = Math.max(size, token + 1);
        const row = new Array(size).fill(null);
        for (const [token, p] of probabilities) row[token] = p > 0 ? Math.log(p) : null;
        logProbs.push(row);
        argmax.push(probabilities.entries().next().value[0]);
    }
    // The line is megabytes at a real vocabulary: written out in full before the exit (an exit
    // right after console.log cuts a pipe's output at 64 KiB).
    await new Promise((done) => process.stdout.write(JSON.stringify({ log_probs: logProbs, argmax }) + "\n", done));
    await context.dispose();
    await model.dispose();
    process.exit(0);
}

const ids = [];
const stamps = [];
const start = performance.now();
for await (const token of sequence.evaluate(prompt, { temperature: 0 })) {
    stamps.push(performance.now());
    ids.push(token);
    if (ids.length >= newTokens) break;
}
const steps = stamps.slice(1).map((t, i) => t - stamps[i]);
steps.sort((a, b) => a - b);
console.log(JSON.stringify({
    ids,
    load_ms: loadMs,
    first_token_ms: stamps[0] - start,
    decode_ms_median: steps.length ? steps[Math.floor(steps.length / 2)] : null,
    decode_ms_mean: steps.length ? steps.reduce((a, b) => a + b, 0) / steps.length : null,
    peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
}));
await context.dispose();
await model.dispose();
