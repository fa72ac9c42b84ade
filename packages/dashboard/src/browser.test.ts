import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { RedisRuleSource } from '@floodgate/core';
import { useRedisServer } from '@floodgate/test-support';
import { Redis } from 'ioredis';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp, token } from './test/app.js';

// Debian's Chromium: .ci/run installs it (apt-get install chromium) when it is missing.
const executablePath = '/usr/bin/chromium';
const screenshot = fileURLToPath(new URL('../docs/screenshot.png', import.meta.url));

const redis = useRedisServer();
let browser: Browser;
/** Waits for what the page shows, up to 10 s (the machine is shared). */
const poll = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 10_000, interval: 50 });
let app: TestApp;

beforeAll(async () => {
  if (!existsSync(executablePath)) {
    throw new Error(`No Chromium at ${executablePath}: .ci/run installs it (Debian's chromium package); here, run apt-get install -y chromium.`);
  }
  browser = await chromium.launch({
    executablePath,
    headless: true,
    timeout: 20_000,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  app = await startApp({ analytics: true, overrides: true } as never);
}, 30_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
});

describe('the dashboard in a browser', () => {
  it('blocks and unblocks a key and raises a limit by an override, and the app decides by them', async () => {
    const context = await browser.newContext({ extraHTTPHeaders: { authorization: token }, viewport: { width: 1200, height: 1400 } });
    const page = await context.newPage();
    page.setDefaultTimeout(10_000);
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    try {
      await page.goto(`${app.url}/floodgate`);
      await page.locator('body[data-ready]').waitFor();
      expect(page.url()).toBe(`${app.url}/floodgate/`);

      // Block a key through the form: it is listed, and the app denies it.
      const blockForm = page.locator('#block-form');
      await blockForm.getByLabel('Key').fill('mallory');
      await blockForm.getByLabel('Minutes').fill('10');
      await blockForm.getByLabel('Reason').fill('credential stuffing');
      await blockForm.getByRole('button', { name: 'Block' }).click();
      const row = page.locator('#blocked tbody tr', { hasText: 'mallory' });
      await poll(() => row.count()).toBe(1);
      expect(await row.textContent()).toContain('credential stuffing');
      expect(await app.call('mallory')).toBe(429);

      // Unblock it from its row: gone from the list, allowed again.
      await page.getByRole('button', { name: 'Unblock mallory' }).click();
      await poll(() => row.count()).toBe(0);
      expect(await page.locator('#status').textContent()).toBe('Unblocked mallory (per-minute).');
      expect(await app.call('mallory')).toBe(200);

      // A customer at its limit (3 a minute) gets 10 by an override set in the form.
      for (let i = 0; i < 3; i++) await app.call('acme');
      expect(await app.call('acme')).toBe(429);
      const overrideForm = page.locator('#override-form');
      await overrideForm.getByLabel('Key or prefix').fill('acme');
      await overrideForm.getByLabel('Rule').selectOption('per-minute');
      await overrideForm.getByLabel('Limit').fill('10');
      await overrideForm.getByRole('button', { name: 'Set override' }).click();
      await poll(() => page.locator('#overrides tbody tr', { hasText: 'acme' }).count()).toBe(1);
      expect(await page.locator('#overrides tbody tr').first().textContent()).toContain('per-minute limit 10');
      expect(await app.call('acme')).toBe(200);

      // One core refuses (a limit of 16 digits) is shown on the page with its code.
      await overrideForm.getByLabel('Limit').fill('1000000000000000');
      await overrideForm.getByRole('button', { name: 'Set override' }).click();
      await poll(() => page.locator('#error').textContent()).toMatch(/^ERR_FG_LIMIT: /);

      // The live panel counts the app's decisions by rule; who is limited most, after a refresh.
      await poll(() => page.locator('#live tbody tr').first().textContent()).toMatch(/^per-minute/);
      await page.getByRole('button', { name: 'Refresh' }).first().click();
      await poll(() => page.locator('#top tbody tr').count()).toBe(2);

      // For the README: a key blocked, an override, the counts.
      await blockForm.getByLabel('Key').fill('203.0.113.9');
      await blockForm.getByRole('button', { name: 'Block' }).click();
      await poll(() => page.locator('#blocked tbody tr').count()).toBe(1);
      await page.screenshot({ path: screenshot, fullPage: true });
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('publishes edited rules through a RedisRuleSource, and shows a refused list with its code', async () => {
    const client = new Redis({ port: redis.server.port, host: '127.0.0.1' });
    const source = new RedisRuleSource({ client, key: 'fg:rules:browser', pollMs: 0 });
    const ruled = await startApp({}, { ruleSource: source });
    await source.attach(ruled.limiter);
    const context = await browser.newContext({ extraHTTPHeaders: { authorization: token } });
    const page = await context.newPage();
    page.setDefaultTimeout(10_000);
    try {
      await page.goto(`${ruled.url}/floodgate/`);
      await page.locator('body[data-ready]').waitFor();
      const editor = page.getByLabel('Rules (JSON), published to every instance');
      expect(JSON.parse(await editor.inputValue())).toEqual([expect.objectContaining({ name: 'per-minute', limit: 3, windowMs: 60_000 })]);

      // A limit of 0 is refused by core: its code on the page, nothing stored, the rules in force unchanged.
      await editor.fill(JSON.stringify([{ name: 'per-minute', limit: 0, windowMs: 60_000 }]));
      await page.getByRole('button', { name: 'Publish rules' }).click();
      await poll(() => page.locator('#error').textContent()).toMatch(/^ERR_FG_LIMIT: /);
      expect(await client.get('fg:rules:browser')).toBeNull();

      // One a minute: every instance takes it; this app's second call is denied.
      await editor.fill(JSON.stringify([{ name: 'per-minute', limit: 1, windowMs: 60_000 }]));
      await page.getByRole('button', { name: 'Publish rules' }).click();
      await poll(() => page.locator('#status').textContent()).toBe('Rules published.');
      const limitCell = page.locator('#rules tbody tr').first().locator('td').nth(3);
      await poll(() => limitCell.textContent()).toBe('1');
      expect(await ruled.call('k')).toBe(200);
      expect(await ruled.call('k')).toBe(429);
    } finally {
      await context.close();
      await ruled.close();
      source.close();
      client.disconnect();
    }
  });
});
