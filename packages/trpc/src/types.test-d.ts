/*
 * Type tests, checked by `tsc --noEmit` (the package's typecheck): the middleware takes the
 * context and input types of the procedure it is used on, and refuses the wrong ones.
 */
import { initTRPC } from '@trpc/server';
import { keyBy, rateLimit } from './index.js';

interface Context {
  user?: { id: string };
  req?: unknown;
}
const t = initTRPC.context<Context>().create();

// Inside .use(), ctx and input are the procedure's, beside keyBy extractors that take any call.
t.procedure.use(rateLimit({ limit: 1, windowMs: 1, key: { ip: keyBy.ip(), user: ({ ctx }) => ctx.user?.id ?? '-' } }));
t.procedure.use(rateLimit({ limit: 1, windowMs: 1, key: keyBy.ip(), cost: ({ ctx }) => (ctx.user ? 1 : 2) }));
// @ts-expect-error the context has no `nope`
t.procedure.use(rateLimit({ limit: 1, windowMs: 1, key: keyBy.ip(), cost: ({ ctx }) => (ctx.nope ? 1 : 2) }));
t.procedure.input((raw: unknown) => raw as { n: number }).use(rateLimit({ limit: 1, windowMs: 1, cost: ({ input }) => input.n }));
// @ts-expect-error the input has no `m`
t.procedure.input((raw: unknown) => raw as { n: number }).use(rateLimit({ limit: 1, windowMs: 1, cost: ({ input }) => input.m }));

// The context of the procedure goes on past the middleware.
t.procedure
  .use(rateLimit({ limit: 1, windowMs: 1 }))
  .use((opts) => opts.next({ ctx: { extra: 1 } }))
  .query(({ ctx }) => [ctx.user?.id, ctx.extra.toFixed()]);
// @ts-expect-error and stays checked
t.procedure.use(rateLimit({ limit: 1, windowMs: 1 })).query(({ ctx }) => ctx.nope);

// Piped after t.middleware(), it sees the context that middleware made.
const authed = t.middleware((opts) => opts.next({ ctx: { userId: 'u1' } }));
t.procedure.use(authed.unstable_pipe(rateLimit({ limit: 1, windowMs: 1, key: ({ ctx }) => ctx.userId }))).query(({ ctx }) => ctx.userId);

// Defined apart from a procedure, it knows the context it is told, or nothing.
const shared = rateLimit<Context>({ limit: 1, windowMs: 1, key: ({ ctx }) => ctx.user?.id ?? '-' });
t.procedure.use(shared);
t.procedure.use(rateLimit({ limit: 1, windowMs: 1 }));
// @ts-expect-error ctx is an object when nothing says more
rateLimit({ limit: 1, windowMs: 1, key: ({ ctx }) => ctx.user });
const other = initTRPC.context<{ tenant: number }>().create();
// @ts-expect-error a middleware written for another context
other.procedure.use(shared);
