// @ts-check
// An LLM gateway that limits tokens per user per minute, when a request's
// tokens are known only once the model has answered. Each user (by API key)
// has 2 000 tokens a minute. A request is admitted with an estimate (the
// prompt's tokens, a token per 4 characters, plus the 200 tokens an answer
// usually takes); once the response is over, `settle` reports the tokens the
// model really used: what the estimate took too much is given back, what it
// took too little is taken as far as the user's quota has it (the quota is
// then empty, and the next request waits for the next minute; nothing more
// is owed). The model is a fake one behind a real HTTP server (model.js). The
// limiter's clock is injected so the run is instant and the numbers are the
// same every time.
//
//   pnpm example llm-tokens   (from the repository root; or: node index.js, packages built)
import { createLimiter, rateLimit } from '@floodgate/express';
import express from 'express';
import { startModel } from './model.js';

const START = Date.UTC(2025, 0, 1);
let now = START;

/** Tokens an answer usually takes: the part of the estimate the prompt cannot tell. */
const EXPECTED_ANSWER_TOKENS = 200;
/** The longest answer the gateway asks the model for. */
const MAX_TOKENS = 1_500;

/** What a request is admitted with, before the model has answered. @param {string} prompt */
const estimate = (prompt) => Math.ceil(prompt.length / 4) + EXPECTED_ANSWER_TOKENS;

const tokensPerMinute = createLimiter({
  algorithm: 'fixed-window',
  limit: 2_000, // tokens per user per windowMs
  windowMs: 60_000,
  now: () => now, // drop this line in a real app: the default clock is Date.now
});

const model = await startModel();
const app = express();

// Your authentication: here, an API key is a user.
app.use((req, res, next) => (req.get('x-api-key') ? next() : res.status(401).json({ error: 'an x-api-key header, please' })));

app.post(
  '/chat',
  express.json(),
  (req, res, next) => (typeof req.body?.prompt === 'string' ? next() : res.status(400).json({ error: 'a JSON body { "prompt": "..." }, please' })),
  rateLimit({
    limiter: tokensPerMinute,
    key: (req) => String(req.get('x-api-key')),
    cost: (req) => estimate(req.body.prompt),
    // Once the response is over: the tokens the model reported (undefined, when it failed: the estimate stands).
    settle: (_req, res) => res.locals.tokens,
    message: { error: 'token quota exceeded' },
  }),
  async (req, res) => {
    const answer = await fetch(`${model.url}/v1/complete`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: req.body.prompt, max_tokens: MAX_TOKENS }),
    });
    if (!answer.ok) {
      res.status(502).json({ error: 'the model failed' });
      return;
    }
    /** @type {{ text: string, usage: { total_tokens: number } }} */
    const completion = await answer.json();
    res.locals.tokens = completion.usage.total_tokens;
    res.json(completion);
  },
);

// What a user has left: the settled count, after every response so far.
app.get('/quota', async (req, res) => {
  res.json({ tokens: (await tokensPerMinute.peek(String(req.get('x-api-key')))).remaining });
});

const server = app.listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));
const address = server.address();
const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

const widths = [7, 5, 55, 8, 6, 11, 4, 8, 11];
/** @param {string[]} cells */
const row = (cells) =>
  cells
    .map((cell, i) => cell.padEnd(widths[i] ?? 10))
    .join('  ')
    .trimEnd();

/** @param {number} offsetMs @param {string} user @param {string} prompt */
async function chat(offsetMs, user, prompt) {
  now = START + offsetMs;
  const res = await fetch(`${base}/chat`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': user },
    body: JSON.stringify({ prompt }),
  });
  /** @type {{ usage?: { total_tokens: number } }} */
  const body = await res.json();
  const quota = await (await fetch(`${base}/quota`, { headers: { 'x-api-key': user } })).json();
  console.log(
    row([
      `+${offsetMs / 1000} s`,
      user,
      JSON.stringify(prompt),
      String(estimate(prompt)),
      String(res.status),
      res.headers.get('x-ratelimit-remaining') ?? '-',
      String(body.usage?.total_tokens ?? '-'),
      String(quota.tokens),
      res.headers.get('retry-after') ?? '-',
    ]),
  );
}

console.log(
  `Per user: ${tokensPerMinute.rules[0]?.limit} tokens a minute; a chat is admitted with an estimate, then settled with the tokens the model used.\n`,
);
console.log(row(['time', 'user', 'prompt', 'estimate', 'status', 'left (est.)', 'used', 'left now', 'Retry-After']));
await chat(0, 'ada', 'Say hello in French, in 3 words.'); // 208 estimated, 12 used: 196 given back
await chat(0, 'ada', 'Summarise the plot of Hamlet in 150 words.'); // used 211: just what was estimated, nothing to settle
await chat(0, 'ada', 'Write a story about a lighthouse keeper in 900 words.'); // 1 200 more than estimated: taken
await chat(0, 'ada', 'Write a poem about the sea in 600 words.'); // the quota has less left than used: empty, nothing owed
await chat(0, 'ada', 'Say thanks in 2 words.'); // 429: the next minute
await chat(0, 'bob', 'Write a poem about the sea in 600 words.'); // bob has his own quota
await chat(60_000, 'ada', 'Say thanks in 2 words.'); // a new minute: the whole quota, no debt carried over

console.log(
  "\nleft (est.): X-RateLimit-Remaining, this response's view (its estimate taken). used: the model's total_tokens. left now: GET /quota, once the response has been settled.",
);
server.close();
await model.close();
