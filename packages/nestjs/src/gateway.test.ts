import 'reflect-metadata';
import { once } from 'node:events';
import { type LimiterOptions, RedisStore } from '@floodgate/core';
import { startRedis } from '@floodgate/test-support';
import type { INestApplication, ModuleMetadata } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { ConnectedSocket, MessageBody, type OnGatewayConnection, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import type { Socket } from 'socket.io';
import { type Socket as ClientSocket, io as connectClient, type ManagerOptions, type SocketOptions } from 'socket.io-client';
import { afterEach, describe, expect, it } from 'vitest';
import { callOf, FloodgateModule, keyBy, type NestRateLimitOptions, RateLimit, SkipRateLimit } from './index.js';

const closers: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A Socket.IO gateway, as a chat app has one: its user from the handshake's auth, limited by the module's options. */
@WebSocketGateway()
class ChatGateway implements OnGatewayConnection {
  handleConnection(client: Socket) {
    const user = client.handshake.auth.user;
    if (typeof user === 'string') client.data.user = { id: user };
  }

  @SubscribeMessage('chat')
  chat(@MessageBody() text: string) {
    return `echo:${text}`;
  }

  @SubscribeMessage('upload')
  @RateLimit({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, stack: false }) // its own limit, in place of the module's
  upload() {
    return 'stored';
  }

  @SubscribeMessage('ping')
  @SkipRateLimit()
  ping() {
    return 'pong';
  }

  @SubscribeMessage('whoami')
  whoami(@ConnectedSocket() client: Socket) {
    return client.data.user?.id ?? 'nobody';
  }
}

/** A Nest app on a loopback port with `providers` (gateways) and the module's options. */
async function startApp(options: NestRateLimitOptions, metadata: ModuleMetadata = { providers: [ChatGateway] }): Promise<string> {
  const moduleRef = await Test.createTestingModule({ ...metadata, imports: [FloodgateModule.forRoot(options)] }).compile();
  const app: INestApplication = moduleRef.createNestApplication({ logger: false });
  await app.listen(0, '127.0.0.1');
  closers.push(() => app.close());
  return (await app.getUrl()).replace('[::1]', '127.0.0.1');
}

async function connected(url: string, options: Partial<ManagerOptions & SocketOptions> = {}): Promise<ClientSocket> {
  const client = connectClient(url, { transports: ['websocket'], reconnection: false, forceNew: true, ...options });
  closers.push(() => client.disconnect());
  await new Promise((resolve) => client.once('connect', () => resolve(undefined)));
  return client;
}

/** Emits `event` and waits for what comes back: the acknowledgement (the handler's result), or the 'exception' event of Nest's gateways. */
function send(client: ClientSocket, event: string, data: unknown = 'hi'): Promise<{ ack?: unknown; exception?: unknown }> {
  return new Promise((resolve) => {
    const onException = (exception: unknown) => resolve({ exception });
    client.once('exception', onException);
    client.emit(event, data, (ack: unknown) => {
      client.off('exception', onException);
      resolve({ ack });
    });
  });
}

const T0 = 1_200_000; // a fixed window of 10 s (and of 60 s) starts here (windows are aligned to the epoch)

describe('WebSocket gateways (Socket.IO, a real socket.io-client)', () => {
  it("denies a client's 3rd message with a WsException that says when to retry, exactly, and lets it through once the window is over", async () => {
    let now = T0 + 3_000;
    const url = await startApp({ algorithm: 'fixed-window', limit: 2, windowMs: 10_000, now: () => now });
    const client = await connected(url);
    expect(await send(client, 'chat', 'a')).toEqual({ ack: 'echo:a' });
    expect(await send(client, 'chat', 'b')).toEqual({ ack: 'echo:b' });
    expect(await send(client, 'chat', 'c')).toEqual({
      exception: {
        status: 'error',
        message: 'Too many requests, please try again later.',
        code: 'RATE_LIMITED',
        retryAfterMs: 7_000,
        rule: 'default',
        event: 'chat',
      },
    });
    now = T0 + 9_999;
    expect(await send(client, 'chat', 'd')).toMatchObject({ exception: { code: 'RATE_LIMITED', retryAfterMs: 1 } });
    now = T0 + 10_000;
    expect(await send(client, 'chat', 'e')).toEqual({ ack: 'echo:e' });
    expect(client.connected).toBe(true); // a denial never drops the connection
  });

  it('keys by the handshake address by default: another address has its own count, whatever headers it sends', async () => {
    const url = await startApp({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: () => T0 });
    const one = await connected(url, { extraHeaders: { 'x-forwarded-for': '203.0.113.9' } });
    expect(await send(one, 'chat')).toEqual({ ack: 'echo:hi' });
    expect(await send(one, 'chat')).toMatchObject({ exception: { code: 'RATE_LIMITED', retryAfterMs: 60_000 } });
    // A second connection from the same address shares the count; from 127.0.0.2 it does not.
    expect(await send(await connected(url), 'chat')).toMatchObject({ exception: { code: 'RATE_LIMITED' } });
    expect(await send(await connected(url, { localAddress: '127.0.0.2' } as Partial<SocketOptions>), 'chat')).toEqual({ ack: 'echo:hi' });
  });

  it('keys by user with keyBy.user(): the socket.data.user set at the connection, the address for clients without one', async () => {
    const url = await startApp({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: () => T0, key: keyBy.user() });
    const ann = await connected(url, { auth: { user: 'ann' } });
    const bob = await connected(url, { auth: { user: 'bob' } });
    const anonymous = await connected(url);
    expect(await send(ann, 'whoami')).toEqual({ ack: 'ann' });
    expect(await send(ann, 'whoami')).toMatchObject({ exception: { code: 'RATE_LIMITED' } });
    expect(await send(bob, 'whoami')).toEqual({ ack: 'bob' });
    expect(await send(anonymous, 'whoami')).toEqual({ ack: 'nobody' });
    expect(await send(anonymous, 'whoami')).toMatchObject({ exception: { code: 'RATE_LIMITED' } });
  });

  it('applies @RateLimit and @SkipRateLimit on message handlers and on the gateway, as on controllers', async () => {
    @WebSocketGateway()
    @RateLimit({ algorithm: 'fixed-window', limit: 3, windowMs: 60_000, key: (_req, context) => `event:${callOf(context)?.event}` })
    class LimitedGateway {
      @SubscribeMessage('a')
      a() {
        return 'a';
      }

      @SubscribeMessage('b')
      @RateLimit({ cost: 3 })
      b() {
        return 'b';
      }
    }
    const now = () => T0;
    const url = await startApp({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, now }, { providers: [ChatGateway, LimitedGateway] });
    const client = await connected(url);
    // ChatGateway: upload has a limit of its own (1), ping none.
    expect(await send(client, 'upload')).toEqual({ ack: 'stored' });
    expect(await send(client, 'upload')).toMatchObject({ exception: { code: 'RATE_LIMITED', rule: 'default', event: 'upload' } });
    for (let i = 0; i < 5; i++) expect(await send(client, 'ping')).toEqual({ ack: 'pong' });
    // LimitedGateway: 3 per event name, b costs all 3 at once.
    expect(await send(client, 'b')).toEqual({ ack: 'b' });
    expect(await send(client, 'b')).toMatchObject({ exception: { code: 'RATE_LIMITED', event: 'b' } });
    for (let i = 0; i < 3; i++) expect(await send(client, 'a')).toEqual({ ack: 'a' });
    expect(await send(client, 'a')).toMatchObject({ exception: { code: 'RATE_LIMITED', event: 'a' } });
  });

  it('answers a bad key with its ERR_FG_* code in the exception, and goes on serving', async () => {
    const url = await startApp({ limit: 5, windowMs: 60_000, key: (_req, context) => (callOf(context)?.event === 'chat' ? '' : 'ok') });
    const client = await connected(url);
    expect(await send(client, 'chat')).toMatchObject({ exception: { status: 'error', code: 'ERR_FG_KEY' } });
    expect(await send(client, 'whoami')).toEqual({ ack: 'nobody' });
  });

  it('follows onStoreError when Redis is gone: allow admits, deny refuses with RATE_LIMITER_UNAVAILABLE', async () => {
    const server = await startRedis();
    closers.push(() => server.stop());
    const client = server.client({ maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    await once(client, 'ready');
    closers.push(() => client.disconnect());
    const policies: NonNullable<LimiterOptions['onStoreError']>[] = ['allow', 'deny'];
    const urls: string[] = [];
    for (const [i, onStoreError] of policies.entries()) {
      urls.push(await startApp({ store: new RedisStore({ client }), prefix: `policy-${i}:`, timeoutMs: 500, onStoreError, limit: 5, windowMs: 60_000 }));
    }
    const [allow, deny] = (await Promise.all(urls.map((url) => connected(url)))) as [ClientSocket, ClientSocket];
    expect(await send(deny, 'chat')).toEqual({ ack: 'echo:hi' }); // while Redis is up
    await server.stop();
    expect(await send(allow, 'chat')).toEqual({ ack: 'echo:hi' });
    expect(await send(deny, 'chat')).toEqual({
      exception: {
        status: 'error',
        message: 'Service unavailable: the rate limiter cannot reach its store.',
        code: 'RATE_LIMITER_UNAVAILABLE',
        retryAfterMs: 1_000,
        rule: 'default',
        event: 'chat',
      },
    });
  });
});
