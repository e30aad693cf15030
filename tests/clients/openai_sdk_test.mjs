// The official OpenAI JavaScript SDK against a running `specdec serve`.
// Usage: node openai_sdk_test.mjs BASE_URL API_KEY
// Prints one line per check; exits 1 on the first failed check. Run by tests/server/test_clients.cpp.
import OpenAI from 'openai';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 60_000 });

function check(condition, what, detail = '') {
  if (!condition) {
    console.log(`FAIL ${what} ${detail}`);
    process.exit(1);
  }
  console.log(`ok   ${what}`);
}

const models = await client.models.list();
const model = models.data[0].id;
check(typeof model === 'string' && model.length > 0, 'models.list returns the served model', model);

const prompt = 'Once upon a time';
const completion = await client.completions.create({ model, prompt, max_tokens: 30, temperature: 0 });
const text = completion.choices[0].text;
check(text.length > 0, 'completions.create returns text', JSON.stringify(completion));
check(completion.usage.completion_tokens === 30, 'completion usage counts 30 tokens', JSON.stringify(completion.usage));

let streamed = '';
let chunks = 0;
let finish = null;
const stream = await client.completions.create({ model, prompt, max_tokens: 30, temperature: 0, stream: true });
for await (const chunk of stream) {
  streamed += chunk.choices[0]?.text ?? '';
  chunks += 1;
  finish = chunk.choices[0]?.finish_reason ?? finish;
}
check(streamed === text, 'streamed completion equals the non-streamed one', JSON.stringify([streamed, text]));
check(chunks > 2 && finish === 'length', 'completion stream has chunks and a finish reason', `${chunks} ${finish}`);

const messages = [
  { role: 'system', content: 'You tell short stories.' },
  { role: 'user', content: prompt },
];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 20, temperature: 0 });
const reply = chat.choices[0].message.content;
check(chat.choices[0].message.role === 'assistant' && reply.length > 0, 'chat.completions.create replies',
      JSON.stringify(chat));

let chatStreamed = '';
let usage = null;
const chatStream = await client.chat.completions.create({
  model, messages, max_tokens: 20, temperature: 0, stream: true, stream_options: { include_usage: true },
});
for await (const chunk of chatStream) {
  chatStreamed += chunk.choices[0]?.delta?.content ?? '';
  if (chunk.usage) usage = chunk.usage;
}
check(chatStreamed === reply, 'streamed chat equals the non-streamed reply', JSON.stringify([chatStreamed, reply]));
check(usage && usage.completion_tokens === chat.usage.completion_tokens, 'chat stream reports usage',
      JSON.stringify(usage));

const custom = await client.completions.create({
  model, prompt, max_tokens: 12, temperature: 0, speculative: { method: 'ngram', draft_max: 4 },
});
check(custom.choices[0].text === text.slice(0, custom.choices[0].text.length),
      'a speculative override keeps the greedy text', JSON.stringify(custom.choices[0]));

try {
  await client.completions.create({ model, prompt, max_tokens: -3 });
  check(false, 'a bad request throws');
} catch (e) {
  check(e instanceof OpenAI.APIError && e.status === 400, 'a bad request is an APIError with status 400',
        String(e));
}
try {
  await new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'wrong', maxRetries: 0 }).models.list();
  check(false, 'a wrong key throws');
} catch (e) {
  check(e instanceof OpenAI.AuthenticationError, 'a wrong API key is an AuthenticationError', String(e));
}
console.log('all checks passed');
