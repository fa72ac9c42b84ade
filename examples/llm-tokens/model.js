// @ts-check
// A fake language model behind a real HTTP server, so that the gateway in
// index.js talks to it as it would to a hosted one: POST /v1/complete with
// { prompt, max_tokens } answers { text, usage: { prompt_tokens,
// completion_tokens, total_tokens } }, the usage report OpenAI-style APIs
// send once the answer is written. Deterministic: a prompt is a token per 4
// characters, and the answer is as long as the prompt asks ("in 600 words":
// 4 tokens per 3 words), cut at max_tokens; 20 words when it does not say.
import { createServer } from 'node:http';

/** @param {string} prompt @param {number} maxTokens */
export function complete(prompt, maxTokens) {
  const words = Number(/in (\d+) words/.exec(prompt)?.[1] ?? 20);
  const promptTokens = Math.ceil(prompt.length / 4);
  const completionTokens = Math.min(maxTokens, Math.ceil((words * 4) / 3));
  return {
    text: `(${Math.floor((completionTokens * 3) / 4)} words)`,
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
  };
}

/** Starts the model on a free loopback port; resolves with its URL and a function that stops it. */
export async function startModel() {
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    /** @type {{ prompt?: unknown, max_tokens?: unknown }} */
    let asked = {};
    try {
      asked = JSON.parse(body);
    } catch {}
    const { prompt, max_tokens: maxTokens } = asked ?? {};
    if (
      req.method !== 'POST' ||
      req.url !== '/v1/complete' ||
      typeof prompt !== 'string' ||
      typeof maxTokens !== 'number' ||
      !Number.isSafeInteger(maxTokens)
    ) {
      res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'POST /v1/complete { prompt, max_tokens }' }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(complete(prompt, maxTokens)));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  return { url, close: () => new Promise((resolve) => server.close(() => resolve(undefined))) };
}
