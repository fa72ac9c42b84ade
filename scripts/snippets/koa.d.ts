// What Koa fragments (packages/koa/README.md, and `<!-- snippet: koa -->` in
// docs/) use without declaring it. A snippet that uses none of these names is a
// whole program (and, in JavaScript, is run).
import type Koa from 'koa';

declare global {
  const app: Koa;
}
