// Load generator for `specdec serve` (no dependencies: Node's built-in fetch).
// Usage: node bench_load.mjs BASE_URL CLIENTS REQUESTS_PER_CLIENT MAX_TOKENS [SPEC_METHOD]
// Each client sends its requests one after another, streaming, greedy, prompts cycling through a
// fixed list. Prints one JSON line: tokens/s over the run, request latency (mean, p50, p95) and
// time to first token (mean, p50, p95), with the server's speculation totals from /metrics.
const [baseURL, clientsArg, perClientArg, maxTokensArg, method] = process.argv.slice(2);
const nClients = Number(clientsArg), perClient = Number(perClientArg), maxTokens = Number(maxTokensArg);
const prompts = [
  'Once upon a time', 'One day, Lily went to the park', 'Tom had a big red ball', 'The sun was shining and',
  'Sara and Ben were friends', 'There was a little bird', 'Mom said to Tim', 'The cat saw a dog',
];

async function metric(name) {
  const text = await (await fetch(`${baseURL}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.split(' ')[1]) : 0;
}

async function one(prompt) {
  const body = { prompt, max_tokens: maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } };
  if (method) body.speculative = { method };
  const t0 = performance.now();
  const response = await fetch(`${baseURL}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  if (response.status !== 200) throw new Error(`status ${response.status}: ${await response.text()}`);
  const decoder = new TextDecoder();
  let buffer = '', ttft = null, tokens = 0;
  for await (const bytes of response.body) {
    buffer += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
      const chunk = JSON.parse(event.slice(6));
      if (ttft === null && chunk.choices?.[0]?.text) ttft = performance.now() - t0;
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
    }
  }
  return { latency: performance.now() - t0, ttft: ttft ?? 0, tokens };
}

const quantile = (xs, q) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

const drafted0 = await metric('specdec_draft_tokens_total');
const accepted0 = await metric('specdec_draft_tokens_accepted_total');
const results = [];
const t0 = performance.now();
await Promise.all(Array.from({ length: nClients }, async (_, c) => {
  for (let i = 0; i < perClient; ++i) results.push(await one(prompts[(c * perClient + i) % prompts.length]));
}));
const seconds = (performance.now() - t0) / 1000;
const drafted = (await metric('specdec_draft_tokens_total')) - drafted0;
const accepted = (await metric('specdec_draft_tokens_accepted_total')) - accepted0;
const tokens = results.reduce((a, r) => a + r.tokens, 0);
const lat = results.map((r) => r.latency), ttft = results.map((r) => r.ttft);
console.log(JSON.stringify({
  clients: nClients, requests: results.length, method: method ?? 'server default', tokens,
  seconds: +seconds.toFixed(3), tokens_per_second: +(tokens / seconds).toFixed(1),
  latency_ms: { mean: +mean(lat).toFixed(1), p50: +quantile(lat, 0.5).toFixed(1), p95: +quantile(lat, 0.95).toFixed(1) },
  ttft_ms: { mean: +mean(ttft).toFixed(1), p50: +quantile(ttft, 0.5).toFixed(1), p95: +quantile(ttft, 0.95).toFixed(1) },
  drafted, accepted, acceptance: drafted ? +(accepted / drafted).toFixed(3) : 0,
  current_k: await metric('specdec_draft_k_current'),
}));
