// CI runs the example and checks every chat: the estimate taken at admission, the
// tokens the model reported, and the quota once each response has been settled.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runExample } from '../example-test.mjs';
import { complete } from './model.js';

test('each chat is admitted with its estimate, then settled with the tokens the model used, never below an empty quota', async () => {
  const stdout = await runExample(import.meta.dirname, ['index.js'], 30_000);
  const rows = stdout
    .split('\n')
    .filter((line) => line.startsWith('+'))
    .map((line) => line.split(/\s{2,}/));
  assert.deepEqual(rows, [
    // time, user, prompt, estimate, status, left (est.), used, left now, Retry-After
    ['+0 s', 'ada', '"Say hello in French, in 3 words."', '208', '200', '1792', '12', '1988', '-'], // 196 given back
    ['+0 s', 'ada', '"Summarise the plot of Hamlet in 150 words."', '211', '200', '1777', '211', '1777', '-'],
    ['+0 s', 'ada', '"Write a story about a lighthouse keeper in 900 words."', '214', '200', '1563', '1214', '563', '-'], // 1 000 more taken
    ['+0 s', 'ada', '"Write a poem about the sea in 600 words."', '210', '200', '353', '810', '0', '-'], // 600 more, 353 left: empty
    ['+0 s', 'ada', '"Say thanks in 2 words."', '206', '429', '0', '-', '0', '60'],
    ['+0 s', 'bob', '"Write a poem about the sea in 600 words."', '210', '200', '1790', '810', '1190', '-'],
    ['+60 s', 'ada', '"Say thanks in 2 words."', '206', '200', '1794', '9', '1991', '-'], // nothing owed from the last minute
  ]);
});

test('the fake model counts a token per 4 characters of prompt and 4 per 3 words of answer, cut at max_tokens', () => {
  assert.deepEqual(complete('Write a poem about the sea in 600 words.', 1_500).usage, { prompt_tokens: 10, completion_tokens: 800, total_tokens: 810 });
  assert.deepEqual(complete('Hi', 1_500).usage, { prompt_tokens: 1, completion_tokens: 27, total_tokens: 28 });
  assert.equal(complete('Write a saga in 9000 words.', 1_500).usage.completion_tokens, 1_500);
});
