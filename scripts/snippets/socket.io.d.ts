// What the fragments of packages/socket.io/README.md use without declaring it:
// the ws recipe the README shows just before them (src/ws-recipe.ts).
import type { limitWebSockets as recipe } from '../src/ws-recipe.js';

declare global {
  const limitWebSockets: typeof recipe;
}
