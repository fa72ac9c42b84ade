// @ts-check
// Opens every chart in docs/simulator/ in headless Chromium, checks that it
// renders (an SVG document, no XML parse error, no console error, every line
// drawn), and saves what the browser shows as <name>.png beside it: the
// previews the docs link to. Run after `node index.js`:
//
//   node render-png.js [--dir DIR] [--chromium /usr/bin/chromium]
//
// Needs a Chromium on the machine (Debian: apt-get install chromium) and
// playwright-core (a root devDependency); CI does not run it.
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

const { values } = parseArgs({ options: { dir: { type: 'string' }, chromium: { type: 'string' } } });
const dir = resolve(values.dir ?? join(import.meta.dirname, '..', '..', 'docs', 'simulator'));
const executablePath = values.chromium ?? process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const files = readdirSync(dir)
  .filter((name) => name.endsWith('.svg'))
  .sort();
if (files.length === 0) throw new Error(`no .svg in ${dir}: run \`node index.js\` first`);

const browser = await chromium.launch({
  executablePath,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
});
let failed = false;
try {
  for (const name of files) {
    const svgPath = join(dir, name);
    const text = readFileSync(svgPath, 'utf8');
    const width = Number(/<svg[^>]*\swidth="(\d+)"/.exec(text)?.[1]);
    const height = Number(/<svg[^>]*\sheight="(\d+)"/.exec(text)?.[1]);
    const lines = (text.match(/<(polyline|path) /g) ?? []).length;

    const page = await browser.newPage({ viewport: { width, height }, deviceScaleFactor: 1 });
    /** @type {string[]} */
    const errors = [];
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(message.text());
    });
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(pathToFileURL(svgPath).href);

    // What the browser made of the file: its root element, parse errors, and how many lines it drew with a size.
    const report = await page.evaluate(() => {
      const root = document.documentElement;
      const drawn = Array.from(document.querySelectorAll('polyline, path')).filter((el) => {
        const box = /** @type {SVGGraphicsElement} */ (el).getBBox();
        return box.width > 0;
      }).length;
      return { root: root.localName, namespace: root.namespaceURI, parseErrors: document.getElementsByTagName('parsererror').length, drawn };
    });
    const problems = [...errors];
    if (report.root !== 'svg' || report.namespace !== 'http://www.w3.org/2000/svg') problems.push(`root element is ${report.namespace} ${report.root}`);
    if (report.parseErrors > 0) problems.push('XML parse error');
    if (report.drawn !== lines) problems.push(`${report.drawn} of ${lines} lines drawn`);

    const pngPath = svgPath.replace(/\.svg$/, '.png');
    await page.screenshot({ path: pngPath, clip: { x: 0, y: 0, width, height } });
    await page.close();
    if (problems.length > 0) {
      failed = true;
      console.error(`FAIL ${name}: ${problems.join('; ')}`);
    } else {
      console.log(`ok ${name}: ${width}x${height}, ${lines} lines drawn -> ${name.replace(/\.svg$/, '.png')}`);
    }
  }
} finally {
  await browser.close();
}
if (failed) process.exit(1);
