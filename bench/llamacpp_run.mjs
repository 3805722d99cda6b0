// Runs a GGUF file on llama.cpp's CPU library (node-llama-cpp 3.21.1) and prints one JSON line:
// the greedy ids after a prompt of token ids, the time to the first token (the prefill) and the
// decode steps after it. Used by bench/llm_compare.py beside `ipex-tool bench --llm`.
//
// Usage: node llamacpp_run.mjs MODEL.gguf --prompt-ids 1,2,3 [--new-tokens 32] [--threads 2]
//        [--context 2048]
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
